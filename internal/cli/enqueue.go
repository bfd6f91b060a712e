package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/uniqueness"
)

const enqueueUsage = `usage: jobpipe enqueue KIND --data JSON [--at TIME | --in DURATION] [--on-duplicate skip|replace|error] [--json] [--database-url URL]

Adds one job of a registered kind. The data is a JSON object with a value for each of the kind's data
columns, read from its table, as in {"customer_id": 42, "url": "https://example.com/hook"}; columns
with a default or that admit NULL may be left out. Every value is checked against its column's type
before anything is written, and every problem is reported at once.

flags:
  --data JSON          the job's data; @FILE reads it from a file, @- from standard input
  --at TIME            do not start the job before TIME (RFC 3339: 2026-11-21T18:00:00Z)
  --in DURATION        do not start the job before DURATION from now by the database's clock (90s, 2h)
  --on-duplicate S     when a waiting job has the same unique fields (kinds with unique fields only):
                       skip (default) keeps the waiting job and prints its id; replace overwrites its
                       data and due time; error fails, exit 1
  --json               print JSON instead of text (fields in docs/cli.md)
  --database-url URL   the database (default $DATABASE_URL, else ` + defaultDatabaseURL + `)
`

func init() {
	register(&command{name: "enqueue", summary: "add a job of a kind from JSON data", usage: enqueueUsage, run: runEnqueue})
}

// enqueueStrategies are the --on-duplicate values and their strategies.
var enqueueStrategies = map[string]uniqueness.Strategy{
	"skip":    uniqueness.Skip,
	"replace": uniqueness.Replace,
	"error":   uniqueness.Error,
}

func runEnqueue(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("enqueue", flag.ContinueOnError)
	dbURL := databaseURLFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	data := fs.String("data", "", "the job's data as a JSON object")
	at := fs.String("at", "", "earliest start, RFC 3339")
	in := fs.String("in", "", "earliest start, from now")
	onDup := fs.String("on-duplicate", "skip", "skip, replace or error")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one KIND, got %d arguments", len(pos))
	}
	req := admin.EnqueueRequest{}
	var ok bool
	if req.OnDuplicate, ok = enqueueStrategies[*onDup]; !ok {
		return usagef("--on-duplicate %q: want skip, replace or error", *onDup)
	}
	if *at != "" && *in != "" {
		return usagef("--at and --in contradict each other: give one")
	}
	if *at != "" {
		t, err := time.Parse(time.RFC3339Nano, *at)
		if err != nil {
			return usagef("--at %q is not an RFC 3339 time: write it as 2026-11-21T18:00:00Z or 2026-11-21T19:00:00+01:00", *at)
		}
		req.ProcessAfter = &t
	}
	if *in != "" {
		d, err := time.ParseDuration(*in)
		if err != nil || d < 0 {
			return usagef("--in %q is not a duration of 0 or more: write it as 90s, 15m or 2h30m", *in)
		}
		req.ProcessIn = d
	}
	if req.Data, err = readData(*data); err != nil {
		return usagef("%v", err)
	}
	pool, err := e.connect(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	k, err := admin.LoadKind(ctx, pool, pos[0])
	if err != nil {
		return unknownKind(ctx, pool, "enqueue", pos[0], err)
	}
	res, err := admin.Enqueue(ctx, pool, k, req)
	var dup *uniqueness.DuplicateError
	if errors.As(err, &dup) {
		return fmt.Errorf("%s: a waiting job with the same unique fields exists: job %d; nothing was added (--on-duplicate skip keeps it, replace overwrites it)", k.Name(), dup.ExistingID)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(e, struct {
			Kind      string `json:"kind"`
			ID        int64  `json:"id"`
			Duplicate bool   `json:"duplicate"`
			Replaced  bool   `json:"replaced"`
		}{k.Name(), res.ID, res.Duplicate, res.Duplicate && req.OnDuplicate == uniqueness.Replace})
	}
	switch {
	case res.Duplicate && req.OnDuplicate == uniqueness.Replace:
		fmt.Fprintf(e.Stdout, "%s: job %d was waiting with the same unique fields: replaced its data and due time\n", k.Name(), res.ID)
	case res.Duplicate:
		fmt.Fprintf(e.Stdout, "%s: job %d is already waiting with the same unique fields: nothing added\n", k.Name(), res.ID)
	default:
		fmt.Fprintf(e.Stdout, "%s: job %d enqueued\n", k.Name(), res.ID)
	}
	return nil
}

// readData reads --data: inline JSON, @FILE or @- for standard input. It checks only that the text
// is one JSON object; the kind's columns are checked once the kind is read.
func readData(v string) (json.RawMessage, error) {
	if v == "" {
		return nil, errors.New(`missing --data: give the job's data as a JSON object, e.g. --data '{"id": 42}'`)
	}
	raw, from := []byte(v), "--data"
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if name == "-" {
			raw, err = io.ReadAll(os.Stdin)
			from = "standard input"
		} else {
			raw, err = os.ReadFile(name)
			from = name
		}
		if err != nil {
			return nil, fmt.Errorf("--data: reading %s: %v", from, err)
		}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("the data in %s is not a JSON object (%s): write it as {\"column\": value, ...}", from, jsonProblem(raw, err))
	}
	return raw, nil
}

// jsonProblem says briefly what is wrong with raw as a JSON object.
func jsonProblem(raw []byte, err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		return "it is a JSON " + typ.Value
	case err != nil:
		return err.Error()
	}
	return "it is null"
}
