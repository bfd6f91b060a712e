package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/jobpipe/jobpipe/migrations"
)

const migrateUsage = `usage: jobpipe migrate up|down|status|version [--database-url URL] [--dir DIR]
       jobpipe migrate create NAME --dir DIR

Applies, rolls back and reports jobpipe's own migrations (recorded in jobpipe_db_version) and,
with --dir, your application's goose SQL migrations in DIR (recorded in goose_db_version).

subcommands:
  up           apply jobpipe's pending migrations, then DIR's
  down         roll back one migration: DIR's latest with --dir, else jobpipe's latest
  status       list every migration with when it was applied, or pending
  version      print the current and latest version of jobpipe's migrations and DIR's
  create NAME  write an empty migration DIR/<UTC timestamp>_NAME.sql; NAME is a-z, 0-9 and _
               (one past DIR's highest version when that is not earlier)

flags:
  --database-url URL  the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `);
                      its search_path, e.g. ?search_path=myschema, selects the schema
  --dir DIR           your application's migration directory
`

func init() {
	register(&command{
		name:    "migrate",
		summary: "apply, roll back and report jobpipe's and your application's migrations",
		usage:   migrateUsage,
		run:     runMigrate,
	})
}

// migrateSubcommands are the subcommands that work on the database through a migrations.Runner.
var migrateSubcommands = map[string]func(ctx context.Context, e *env, r *migrations.Runner) error{
	"up":      migrateUp,
	"down":    migrateDown,
	"status":  migrateStatus,
	"version": migrateVersion,
}

func runMigrate(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return usagef("missing subcommand; want up, down, status, version or create")
	}
	sub := args[0]
	if isHelpFlag(sub) {
		return flag.ErrHelp
	}
	do, ok := migrateSubcommands[sub]
	if !ok && sub != "create" {
		return usagef("unknown subcommand %q; want up, down, status, version or create", sub)
	}
	fs := flag.NewFlagSet("migrate "+sub, flag.ContinueOnError)
	dbURL := databaseURLFlag(fs)
	dir := fs.String("dir", "", "the application's migration directory")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return err
	}
	if sub == "create" {
		return migrateCreate(e, *dir, pos)
	}
	if len(pos) > 0 {
		return &usageError{where: fs.Name(), err: fmt.Errorf("unexpected argument %q; %s takes none", pos[0], sub)}
	}
	if *dir != "" {
		if err := checkDir(*dir); err != nil {
			return err
		}
	}
	pool, err := e.connect(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	r, err := migrations.NewRunner(ctx, db, *dir)
	if err != nil {
		return err
	}
	return do(ctx, e, r)
}

// checkDir fails unless dir is an existing directory, before anything connects.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("--dir %s does not exist; pass your application's migration directory "+
			"(jobpipe migrate create NAME --dir %s makes it with a first migration)", dir, dir)
	case err != nil:
		return fmt.Errorf("--dir %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("--dir %s is a file; pass the directory that holds your migrations", dir)
	}
	return nil
}

func migrateUp(ctx context.Context, e *env, r *migrations.Runner) error {
	res, err := r.Up(ctx)
	for _, m := range res {
		fmt.Fprintf(e.Stdout, "applied %s %s (%s)\n", m.Source, m.File, duration(m.Duration))
	}
	if err != nil {
		return err
	}
	vs, err := r.Version(ctx)
	if err != nil {
		return err
	}
	if len(res) == 0 {
		fmt.Fprintf(e.Stdout, "nothing to apply; %s\n", versions(vs))
		return nil
	}
	fmt.Fprintf(e.Stdout, "applied %d %s; now %s\n", len(res), plural(len(res), "migration"), versions(vs))
	return nil
}

func migrateDown(ctx context.Context, e *env, r *migrations.Runner) error {
	m, err := r.Down(ctx)
	if err != nil {
		return err
	}
	vs, err := r.Version(ctx)
	if err != nil {
		return err
	}
	if m == nil {
		// Down works on the last source: the application's with --dir, else jobpipe's.
		fmt.Fprintf(e.Stdout, "nothing to roll back: no %s migrations are applied\n", vs[len(vs)-1].Source)
		return nil
	}
	fmt.Fprintf(e.Stdout, "rolled back %s %s (%s)\n", m.Source, m.File, duration(m.Duration))
	fmt.Fprintf(e.Stdout, "now %s\n", versions(vs))
	return nil
}

func migrateStatus(ctx context.Context, e *env, r *migrations.Runner) error {
	st, err := r.Status(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tVERSION\tAPPLIED AT\tFILE")
	for _, m := range st {
		at, file := "pending", m.File
		if m.Applied {
			at = m.AppliedAt.Format(time.DateTime)
		}
		if file == "" {
			file = "(no file: unknown version)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", m.Source, m.Version, at, file)
	}
	return tw.Flush()
}

func migrateVersion(ctx context.Context, e *env, r *migrations.Runner) error {
	vs, err := r.Version(ctx)
	if err != nil {
		return err
	}
	for _, v := range vs {
		fmt.Fprintf(e.Stdout, "%s version %d (latest %d)\n", v.Source, v.Current, v.Latest)
	}
	return nil
}

func migrateCreate(e *env, dir string, pos []string) error {
	switch {
	case len(pos) == 0:
		return &usageError{where: "migrate create", err: errors.New("missing NAME, e.g. jobpipe migrate create add_email_index --dir db/migrations")}
	case len(pos) > 1:
		return &usageError{where: "migrate create", err: fmt.Errorf("unexpected argument %q; create takes one NAME", pos[1])}
	case dir == "":
		return &usageError{where: "migrate create", err: errors.New("missing --dir DIR: the directory to write the migration in")}
	}
	path, err := migrations.Create(dir, pos[0], e.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "created %s\n", path)
	return nil
}

// versions is where each source stands, e.g. "jobpipe at version 1, app at version 20250101120000".
func versions(vs []migrations.SourceVersion) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%s at version %d", v.Source, v.Current)
	}
	return strings.Join(parts, ", ")
}

// duration is short and stable: whole milliseconds below a second.
func duration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return d.Round(time.Millisecond).String()
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
