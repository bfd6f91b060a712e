package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/migrations"
)

var kindUsage = `usage: jobpipe kind new NAME --field COLUMN:TYPE[:null] ... [--unique COL[,COL...]]
                     [--key COL[,COL...]] [--order created|process_after] [--table [SCHEMA.]TABLE] [--dir DIR]

Writes a goose migration that creates the table of job kind NAME: its data columns, jobpipe's pipeline
columns, the indexes that uniqueness and dispatch need, and its row in the jobpipe_kinds registry. Apply
it with "jobpipe migrate up --dir DIR". Without --dir the migration is printed instead.

Names are lower-case letters, digits and underscores (at most 48). Nothing is written when any part of
the command is wrong; every problem is reported.

flags:
  --field COLUMN:TYPE[:null]  a data column (repeat for each); NOT NULL unless ":null" is added.
                              TYPE is one of: ` + strings.Join(jobinfo.ColumnTypes(), ", ") + `,
                              varchar(n), numeric(p,s)
  --unique COLS               the until-executed unique key: a new job with the same values as a job
                              that has not started yet is a duplicate
  --key COLS                  the concurrency key: jobs of one key start in order, and at most the
                              kind's key limit run at once (default: the --unique columns)
  --no-key                    the --unique columns are not a concurrency key
  --order ORDER               order of jobs within a key: created (default) or process_after
  --table NAME                the table (default NAME), optionally schema-qualified
  --dir DIR                   write the migration into DIR (created if missing)
`

func init() {
	register(&command{
		name:    "kind",
		summary: "write the migration that creates a job kind's table",
		usage:   kindUsage,
		run:     runKind,
	})
}

// fieldList collects repeated --field flags.
type fieldList []jobinfo.Column

func (f *fieldList) String() string { return fmt.Sprint(*f) }

func (f *fieldList) Set(v string) error {
	name, typ, ok := strings.Cut(v, ":")
	if !ok || name == "" || typ == "" {
		return fmt.Errorf("field %q is not COLUMN:TYPE, e.g. customer_id:bigint or note:text:null", v)
	}
	col := jobinfo.Column{Name: name, Type: typ}
	if t, found := strings.CutSuffix(typ, ":null"); found {
		col.Type, col.Nullable = t, true
	}
	*f = append(*f, col)
	return nil
}

func runKind(_ context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("missing subcommand; want new")
	}
	if isHelpFlag(args[0]) {
		return flag.ErrHelp
	}
	if args[0] != "new" {
		return usagef("unknown subcommand %q; want new", args[0])
	}
	fs := flag.NewFlagSet("kind new", flag.ContinueOnError)
	var fields fieldList
	fs.Var(&fields, "field", "a data column COLUMN:TYPE[:null]")
	unique := fs.String("unique", "", "until-executed unique columns")
	key := fs.String("key", "", "concurrency key columns")
	noKey := fs.Bool("no-key", false, "the unique columns are not a concurrency key")
	order := fs.String("order", string(jobinfo.OrderCreated), "created or process_after")
	table := fs.String("table", "", "the table name")
	dir := fs.String("dir", "", "where to write the migration")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return &usageError{where: fs.Name(), err: fmt.Errorf("want exactly one kind NAME, got %d arguments", len(pos))}
	}
	spec := jobinfo.TableSpec{Kind: pos[0], Table: *table, Columns: fields, Unique: splitList(*unique),
		Key: splitList(*key), Order: jobinfo.Order(*order)}
	if spec.Key == nil && !*noKey {
		spec.Key = spec.Unique
	}
	if *noKey && *key != "" {
		return &usageError{where: fs.Name(), err: fmt.Errorf("--no-key and --key contradict each other: give one")}
	}
	migration, err := spec.Migration()
	if err != nil {
		return fmt.Errorf("kind new: nothing written:\n%w", err)
	}
	if *dir == "" {
		fmt.Fprint(e.Stdout, migration)
		return nil
	}
	path, err := migrations.Write(*dir, "create_"+spec.Kind, e.Now(), migration)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "wrote %s\napply it with: jobpipe migrate up --dir %s\n", path, *dir)
	return nil
}

// splitList splits "a,b" into its trimmed, non-empty parts; "" gives nil.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
