package admin_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/internal/testenv"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// typedSpec has a column of each type Enqueue fills; i8 and t are NOT NULL. setupTyped adds region
// (NOT NULL with a default) and pt (a point, which Enqueue cannot fill).
var typedSpec = jobinfo.TableSpec{Kind: "typed", Columns: []jobinfo.Column{
	{Name: "i8", Type: "bigint"},
	{Name: "t", Type: "text"},
	{Name: "i2", Type: "smallint", Nullable: true},
	{Name: "i4", Type: "integer", Nullable: true},
	{Name: "f4", Type: "real", Nullable: true},
	{Name: "f8", Type: "double precision", Nullable: true},
	{Name: "num", Type: "numeric(5,2)", Nullable: true},
	{Name: "big", Type: "numeric", Nullable: true},
	{Name: "vc", Type: "varchar(5)", Nullable: true},
	{Name: "b", Type: "boolean", Nullable: true},
	{Name: "u", Type: "uuid", Nullable: true},
	{Name: "ts", Type: "timestamptz", Nullable: true},
	{Name: "tsl", Type: "timestamp", Nullable: true},
	{Name: "d", Type: "date", Nullable: true},
	{Name: "iv", Type: "interval", Nullable: true},
	{Name: "j", Type: "json", Nullable: true},
	{Name: "jb", Type: "jsonb", Nullable: true},
	{Name: "by", Type: "bytea", Nullable: true},
	{Name: "at", Type: "text[]", Nullable: true},
	{Name: "a8", Type: "bigint[]", Nullable: true},
	{Name: "a4", Type: "integer[]", Nullable: true},
	{Name: "au", Type: "uuid[]", Nullable: true},
}}

// typedColumns is how messages list typedSpec's columns.
const typedColumns = "i8 bigint, t text, i2 smallint, i4 integer, f4 real, f8 double precision, num numeric(5,2), " +
	"big numeric, vc character varying(5), b boolean, u uuid, ts timestamp with time zone, tsl timestamp without time zone, " +
	"d date, iv interval, j json, jb jsonb, by bytea, at text[], a8 bigint[], a4 integer[], au uuid[], region text, pt point"

// setupTyped creates the kind typed and returns a pool whose sessions are in UTC, so that JSON
// renders timestamps the same everywhere.
func setupTyped(t *testing.T) (*testenv.Schema, *pgxpool.Pool, *admin.Kind) {
	t.Helper()
	s := setup(t)
	createSpec(t, s, typedSpec)
	exec(t, s, `ALTER TABLE typed ADD COLUMN region text NOT NULL DEFAULT 'eu', ADD COLUMN pt point`)
	cfg := s.Config()
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return s, pool, load(t, s, "typed")
}

func TestEnqueueFillsEveryType(t *testing.T) {
	t.Parallel()
	s, pool, k := setupTyped(t)
	ctx := context.Background()
	res, err := admin.Enqueue(ctx, pool, k, admin.EnqueueRequest{Data: []byte(`{
	"i8": 9007199254740993, "t": "héllo <&>", "i2": -32768, "i4": 2e3, "f4": 1.5, "f8": 0.1,
	"num": 123.456, "big": 12345678901234567890.123456789, "vc": "abcde   ", "b": true,
	"u": "123E4567-e89b-12d3-a456-426614174000", "ts": "2024-05-01T14:00:00+02:00", "tsl": "2024-05-01T12:00:00.5",
	"d": "2024-02-29", "iv": "P1DT1H30M", "j": {"b": 1, "a": [1, 2]}, "jb": {"b": 1, "a": null}, "by": "aGVsbG8=",
	"at": ["x", null, "y\"z"], "a8": [1, -2.0], "a4": [], "au": ["123e4567-e89b-12d3-a456-426614174000", null], "pt": null}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res != (uniqueness.Result{ID: 1}) {
		t.Errorf("result %+v, want job 1", res)
	}
	j, err := admin.GetJob(ctx, pool, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"i8":9007199254740993,"t":"héllo <&>","i2":-32768,"i4":2000,"f4":1.5,"f8":0.1,"num":123.46,` +
		`"big":12345678901234567890.123456789,"vc":"abcde","b":true,"u":"123e4567-e89b-12d3-a456-426614174000",` +
		`"ts":"2024-05-01T12:00:00+00:00","tsl":"2024-05-01T12:00:00.5","d":"2024-02-29","iv":"1 day 01:30:00",` +
		`"j":{"b": 1, "a": [1, 2]},"jb":{"a": null, "b": 1},"by":"\\x68656c6c6f","at":["x",null,"y\"z"],"a8":[1,-2],` +
		`"a4":[],"au":["123e4567-e89b-12d3-a456-426614174000",null],"region":"eu","pt":null}`
	if string(j.Data) != want {
		t.Errorf("data:\n got %s\nwant %s", j.Data, want)
	}
	assertRows(t, "rows", pipelineRows(t, s, "typed"), []string{"1 waiting attempts=0 token=0 slot=- after=null error=-"})
}

func TestEnqueueRefusesBadData(t *testing.T) {
	t.Parallel()
	s, pool, k := setupTyped(t)
	ctx := context.Background()
	const prefix = `admin: invalid data for kind "typed": `
	for _, tt := range []struct {
		name, data, want string
	}{
		{"empty", ``, `the data is empty: give a JSON object with the kind's columns (` + typedColumns + `) as keys`},
		{"blank", " \n", `the data is empty: give a JSON object with the kind's columns (` + typedColumns + `) as keys`},
		{"not JSON", `{"i8": 1,`, `the data is not valid JSON: unexpected end of JSON input`},
		{"not JSON either", `{i8: 1}`, `the data is not valid JSON: invalid character 'i' looking for beginning of object key string`},
		{"trailing text", `{"i8": 1, "t": "x"} x`, `the data is not valid JSON: invalid character 'x' after top-level value`},
		{"not UTF-8", "{\"t\": \"\xff\"}", `the data is not valid UTF-8`},
		{"an array", `[1, 2]`, `the data is an array, not a JSON object with the kind's columns (` + typedColumns + `) as keys`},
		{"null", `null`, `the data is null, not a JSON object with the kind's columns (` + typedColumns + `) as keys`},
		{"a string", `"x"`, `the data is a string, not a JSON object with the kind's columns (` + typedColumns + `) as keys`},
		{"unknown column", `{"i8": 1, "t": "x", "nope": 1}`, `column "nope": not a column of kind "typed"; its columns are ` + typedColumns},
		{"pipeline column", `{"i8": 1, "t": "x", "id": 5}`, `column "id": not job data: jobpipe sets it`},
		{"process_after", `{"i8": 1, "t": "x", "process_after": "2024-05-01T12:00:00Z"}`,
			`column "process_after": not job data: give the start time as ProcessAfter or ProcessIn (--at or --in on the command line)`},
		{"given twice", `{"i8": 1, "t": "x", "i8": 2}`, `column "i8" (bigint): given twice`},
		{"missing", `{"t": "x"}`, `column "i8" (bigint): missing: the column is NOT NULL and has no default`},
		{"all missing", `{}`, `column "i8" (bigint): missing: the column is NOT NULL and has no default; ` +
			`column "t" (text): missing: the column is NOT NULL and has no default`},
		{"null in NOT NULL", `{"i8": null, "t": "x"}`, `column "i8" (bigint): null is not allowed: the column is NOT NULL`},
		{"null in NOT NULL with a default", `{"i8": 1, "t": "x", "region": null}`,
			`column "region" (text): null is not allowed: the column is NOT NULL (leave it out for its default)`},

		{"fraction for an integer", `{"i8": 1.5, "t": "x"}`, `column "i8" (bigint): 1.5 is not an integer`},
		{"string for an integer", `{"i8": "12", "t": "x"}`, `column "i8" (bigint): "12" is a string, not an integer`},
		{"boolean for an integer", `{"i8": true, "t": "x"}`, `column "i8" (bigint): true is a boolean, not an integer`},
		{"bigint out of range", `{"i8": 9223372036854775808, "t": "x"}`,
			`column "i8" (bigint): 9223372036854775808 is out of range (-9223372036854775808 to 9223372036854775807)`},
		{"bigint far out of range", `{"i8": 1e999999999, "t": "x"}`,
			`column "i8" (bigint): 1e999999999 is out of range (-9223372036854775808 to 9223372036854775807)`},
		{"tiny fraction", `{"i8": 1e-999999999, "t": "x"}`, `column "i8" (bigint): 1e-999999999 is not an integer`},
		{"smallint out of range", `{"i8": 1, "t": "x", "i2": 32768}`, `column "i2" (smallint): 32768 is out of range (-32768 to 32767)`},
		{"integer out of range", `{"i8": 1, "t": "x", "i4": -2.147483649e9}`,
			`column "i4" (integer): -2.147483649e9 is out of range (-2147483648 to 2147483647)`},
		{"real out of range", `{"i8": 1, "t": "x", "f4": 1e39}`, `column "f4" (real): 1e39 is out of range (the largest magnitude is 3.4028234663852886e+38)`},
		{"string for a double", `{"i8": 1, "t": "x", "f8": "0.5"}`, `column "f8" (double precision): "0.5" is a string, not a number`},
		{"numeric(5,2) too large", `{"i8": 1, "t": "x", "num": 1000}`,
			`column "num" (numeric(5,2)): 1000 is out of range: it must round to an absolute value less than 10^3`},
		{"numeric(5,2) rounding up too large", `{"i8": 1, "t": "x", "num": -999.995}`,
			`column "num" (numeric(5,2)): -999.995 is out of range: it must round to an absolute value less than 10^3`},
		{"numeric exponent", `{"i8": 1, "t": "x", "big": 1e1001}`,
			`column "big" (numeric): 1e1001 is out of range: PostgreSQL takes exponents from -1000 to 1000`},
		{"string for a numeric", `{"i8": 1, "t": "x", "big": "1"}`, `column "big" (numeric): "1" is a string, not a number`},
		{"number for text", `{"i8": 1, "t": 5}`, `column "t" (text): 5 is a number, not a string`},
		{"NUL in text", `{"i8": 1, "t": "a\u0000b"}`, `column "t" (text): "a\u0000b" contains the character \u0000, which PostgreSQL text cannot hold`},
		{"varchar too long", `{"i8": 1, "t": "x", "vc": "abcdéf"}`, `column "vc" (character varying(5)): "abcdéf" is 6 characters long; the column holds at most 5`},
		{"string for a boolean", `{"i8": 1, "t": "x", "b": "true"}`, `column "b" (boolean): "true" is a string, not true or false`},
		{"not a UUID", `{"i8": 1, "t": "x", "u": "123e4567e89b12d3a456426614174000"}`,
			`column "u" (uuid): "123e4567e89b12d3a456426614174000" is not a UUID such as "123e4567-e89b-12d3-a456-426614174000"`},
		{"number for a UUID", `{"i8": 1, "t": "x", "u": 7}`,
			`column "u" (uuid): 7 is a number, not a UUID string such as "123e4567-e89b-12d3-a456-426614174000"`},
		{"time without offset", `{"i8": 1, "t": "x", "ts": "2024-05-01T12:00:00"}`,
			`column "ts" (timestamp with time zone): "2024-05-01T12:00:00" is not an RFC 3339 time such as "2024-05-01T12:00:00Z" or "2024-05-01T14:00:00+02:00"`},
		{"number for a time", `{"i8": 1, "t": "x", "ts": 1714564800}`,
			`column "ts" (timestamp with time zone): 1714564800 is a number, not an RFC 3339 time such as "2024-05-01T12:00:00Z" or "2024-05-01T14:00:00+02:00"`},
		{"not a timestamp", `{"i8": 1, "t": "x", "tsl": "yesterday"}`,
			`column "tsl" (timestamp without time zone): "yesterday" is not a date and time such as "2024-05-01T12:00:00" (with an offset, as in "2024-05-01T12:00:00Z", it is converted to UTC)`},
		{"no such date", `{"i8": 1, "t": "x", "d": "2023-02-29"}`, `column "d" (date): "2023-02-29" is not a date such as "2024-05-01"`},
		{"year zero", `{"i8": 1, "t": "x", "d": "0000-01-01"}`, `column "d" (date): "0000-01-01" is not a date such as "2024-05-01"`},
		{"not an interval", `{"i8": 1, "t": "x", "iv": "a fortnight"}`,
			`column "iv" (interval): "a fortnight" is not an interval PostgreSQL reads (invalid input syntax for type interval: "a fortnight"): ` +
				`write it like "1 hour 30 minutes", "01:30:00" or "PT1H30M"`},
		{"number for an interval", `{"i8": 1, "t": "x", "iv": 3600}`,
			`column "iv" (interval): 3600 is a number, not an interval string such as "1 hour 30 minutes", "01:30:00" or "PT1H30M"`},
		{"NUL in jsonb", `{"i8": 1, "t": "x", "jb": {"a": ["\u0000"]}}`,
			`column "jb" (jsonb): {"a":["\u0000"]} contains the character \u0000, which jsonb cannot hold`},
		{"not base64", `{"i8": 1, "t": "x", "by": "hello!"}`,
			`column "by" (bytea): "hello!" is not base64 (as encoding/json writes []byte): illegal base64 data at input byte 5`},
		{"number for bytea", `{"i8": 1, "t": "x", "by": 5}`, `column "by" (bytea): 5 is a number, not a base64 string (as encoding/json writes []byte)`},
		{"string for an array", `{"i8": 1, "t": "x", "at": "x"}`, `column "at" (text[]): "x" is a string, not an array of strings`},
		{"number in a text array", `{"i8": 1, "t": "x", "at": ["a", 1]}`, `column "at" (text[]): element 2: 1 is a number, not a string`},
		{"fraction in a bigint array", `{"i8": 1, "t": "x", "a8": [1, 1.5]}`, `column "a8" (bigint[]): element 2: 1.5 is not an integer`},
		{"nested array", `{"i8": 1, "t": "x", "a8": [[1]]}`, `column "a8" (bigint[]): element 1: [1] is an array, not an integer`},
		{"integer array out of range", `{"i8": 1, "t": "x", "a4": [2147483648]}`,
			`column "a4" (integer[]): element 1: 2147483648 is out of range (-2147483648 to 2147483647)`},
		{"not a UUID in an array", `{"i8": 1, "t": "x", "au": ["<x>"]}`,
			`column "au" (uuid[]): element 1: "<x>" is not a UUID such as "123e4567-e89b-12d3-a456-426614174000"`},
		{"a type enqueue cannot fill", `{"i8": 1, "t": "x", "pt": "(1,2)"}`,
			`column "pt" (point): enqueue cannot fill a column of type point from JSON: enqueue such jobs from Go or SQL`},
		{"every problem at once", `{"nope": 1, "i8": "1", "t": 2, "iv": "soon", "zzz": true}`,
			`column "nope": not a column of kind "typed"; its columns are ` + typedColumns + `; ` +
				`column "zzz": not a column of kind "typed"; its columns are ` + typedColumns + `; ` +
				`column "i8" (bigint): "1" is a string, not an integer; ` +
				`column "t" (text): 2 is a number, not a string; ` +
				`column "iv" (interval): "soon" is not an interval PostgreSQL reads (invalid input syntax for type interval: "soon"): ` +
				`write it like "1 hour 30 minutes", "01:30:00" or "PT1H30M"`},
		{"a long value is cut", `{"i8": "` + strings.Repeat("é", 40) + `", "t": "x"}`,
			`column "i8" (bigint): "` + strings.Repeat("é", 29) + `… is a string, not an integer`},
	} {
		_, err := admin.Enqueue(ctx, pool, k, admin.EnqueueRequest{Data: []byte(tt.data)})
		var dataErr *admin.DataError
		if err == nil || err.Error() != prefix+tt.want || !errors.Is(err, admin.ErrInvalid) || !errors.As(err, &dataErr) {
			t.Errorf("%s:\n got %v\nwant %s", tt.name, err, prefix+tt.want)
		}
	}
	if n := queryInt(t, s, `SELECT count(*) FROM typed`); n != 0 {
		t.Errorf("%d rows written, want none", n)
	}
}

func TestEnqueueRefusesBadRequests(t *testing.T) {
	t.Parallel()
	s, pool, k := setupTyped(t)
	ctx := context.Background()
	at := time.Now().Add(time.Hour)
	data := []byte(`{"i8": 1, "t": "x"}`)
	for _, tt := range []struct {
		name string
		req  admin.EnqueueRequest
		want string
	}{
		{"both", admin.EnqueueRequest{Data: data, ProcessAfter: &at, ProcessIn: time.Minute},
			`admin: invalid schedule: give a start time or a delay, not both`},
		{"negative delay", admin.EnqueueRequest{Data: data, ProcessIn: -time.Second}, `admin: invalid delay -1s: give 0 or more`},
		{"unknown strategy", admin.EnqueueRequest{Data: data, OnDuplicate: 99},
			`admin: invalid on-duplicate strategy Strategy(99): use skip, replace, replace-data, replace-schedule or error`},
	} {
		_, err := admin.Enqueue(ctx, pool, k, tt.req)
		if err == nil || err.Error() != tt.want || !errors.Is(err, admin.ErrInvalid) {
			t.Errorf("%s:\n got %v\nwant %s", tt.name, err, tt.want)
		}
	}
	if n := queryInt(t, s, `SELECT count(*) FROM typed`); n != 0 {
		t.Errorf("%d rows written, want none", n)
	}
}

// Columns left out get their default, or NULL; a schedule is the database's time.
func TestEnqueueDefaultsAndSchedule(t *testing.T) {
	t.Parallel()
	s, pool, k := setupTyped(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, r := range []admin.EnqueueRequest{
		{Data: []byte(`{"i8": 1, "t": "now"}`)},
		{Data: []byte(`{"i8": 2, "t": "in an hour", "region": "us"}`), ProcessIn: time.Hour},
		{Data: []byte(`{"i8": 3, "t": "at"}`), ProcessAfter: &at},
	} {
		if _, err := admin.Enqueue(ctx, pool, k, r); err != nil {
			t.Fatal(err)
		}
	}
	assertRows(t, "rows", queryRows(t, s, `SELECT format('%s %s region=%s i2=%s after=%s', i8, t, region, coalesce(i2::text, 'NULL'),
	CASE WHEN process_after IS NULL THEN 'null'
		WHEN process_after BETWEEN now() + interval '59 minutes' AND now() + interval '1 hour' THEN 'in an hour'
		ELSE to_char(process_after AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') END)
FROM typed ORDER BY id`), []string{
		"1 now region=eu i2=NULL after=null",
		"2 in an hour region=us i2=NULL after=in an hour",
		"3 at region=eu i2=NULL after=2030-01-02 03:04:05",
	})
}

func TestEnqueueOnDuplicate(t *testing.T) {
	t.Parallel()
	s := setup(t)
	ctx := context.Background()
	k := load(t, s, "notice")
	enqueue := func(body string, strategy uniqueness.Strategy, in time.Duration) (uniqueness.Result, error) {
		return admin.Enqueue(ctx, s.Pool, k, admin.EnqueueRequest{
			Data: []byte(`{"user_id": 1, "event_id": "e1", "body": "` + body + `"}`), OnDuplicate: strategy, ProcessIn: in})
	}
	row := func() string {
		t.Helper()
		return strings.Join(queryRows(t, s, `SELECT format('%s %s after=%s', id, body,
	CASE WHEN process_after IS NULL THEN 'null' WHEN process_after > now() THEN 'future' ELSE 'past' END) FROM notice ORDER BY id`), ", ")
	}
	steps := []struct {
		body     string
		strategy uniqueness.Strategy
		in       time.Duration
		want     uniqueness.Result
		wantErr  string
		wantRow  string
	}{
		{"a", uniqueness.Skip, 0, uniqueness.Result{ID: 1}, "", "1 a after=null"},
		{"b", uniqueness.Skip, 0, uniqueness.Result{ID: 1, Duplicate: true}, "", "1 a after=null"},
		{"c", uniqueness.Replace, 0, uniqueness.Result{ID: 1, Duplicate: true}, "", "1 c after=null"},
		{"d", uniqueness.Error, time.Hour, uniqueness.Result{ID: 1, Duplicate: true},
			`uniqueness: kind "notice" already has waiting job 1 with the same unique fields`, "1 c after=null"},
		{"e", uniqueness.ReplaceSchedule, time.Hour, uniqueness.Result{ID: 1, Duplicate: true}, "", "1 c after=future"},
		{"f", uniqueness.ReplaceData, 0, uniqueness.Result{ID: 1, Duplicate: true}, "", "1 f after=future"},
	}
	for _, st := range steps {
		res, err := enqueue(st.body, st.strategy, st.in)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if res != st.want || gotErr != st.wantErr {
			t.Errorf("%s with %v: %+v, %q; want %+v, %q", st.body, st.strategy, res, gotErr, st.want, st.wantErr)
		}
		if st.wantErr != "" && !errors.Is(err, uniqueness.ErrDuplicate) {
			t.Errorf("%s with %v: %v does not match uniqueness.ErrDuplicate", st.body, st.strategy, err)
		}
		if got := row(); got != st.wantRow {
			t.Errorf("after %s with %v: rows %s, want %s", st.body, st.strategy, got, st.wantRow)
		}
	}
}

// What PostgreSQL refuses (constraints of the application's own) is reported as the data's
// problem, and nothing is written.
func TestEnqueueTranslatesConstraints(t *testing.T) {
	t.Parallel()
	s, pool, k := setupTyped(t)
	ctx := context.Background()
	exec(t, s, `ALTER TABLE typed ADD CONSTRAINT i8_positive CHECK (i8 > 0)`)
	exec(t, s, `CREATE UNIQUE INDEX typed_t_key ON typed (t)`)
	if _, err := admin.Enqueue(ctx, pool, k, admin.EnqueueRequest{Data: []byte(`{"i8": 1, "t": "taken"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ data, want string }{
		{`{"i8": -1, "t": "x"}`, `admin: invalid data for kind "typed": PostgreSQL refused the job: ` +
			`new row for relation "typed" violates check constraint "i8_positive"`},
		{`{"i8": 2, "t": "taken"}`, `admin: invalid data for kind "typed": PostgreSQL refused the job: ` +
			`duplicate key value violates unique constraint "typed_t_key": Key (t)=(taken) already exists`},
		{`{"i8": 2, "t": "x", "jb": ["\ud800"]}`, `admin: invalid data for kind "typed": column "jb" (jsonb): PostgreSQL refused it: ` +
			`invalid input syntax for type json: Unicode low surrogate must follow a high surrogate`},
		{`{"i8": 2, "t": "x", "j": "\ud800", "jb": "\ud800"}`, `admin: invalid data for kind "typed": PostgreSQL refused the job: ` +
			`invalid input syntax for type json: Unicode low surrogate must follow a high surrogate`},
	} {
		_, err := admin.Enqueue(ctx, pool, k, admin.EnqueueRequest{Data: []byte(tt.data)})
		if err == nil || err.Error() != tt.want || !errors.Is(err, admin.ErrInvalid) {
			t.Errorf("%s:\n got %v\nwant %s", tt.data, err, tt.want)
		}
	}
	if n := queryInt(t, s, `SELECT count(*) FROM typed`); n != 1 {
		t.Errorf("%d rows, want the first job only", n)
	}
}

// In the caller's transaction, a refused interval aborts nothing: the transaction goes on.
func TestEnqueueInTransaction(t *testing.T) {
	t.Parallel()
	s, pool, k := setupTyped(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := admin.Enqueue(ctx, tx, k, admin.EnqueueRequest{Data: []byte(`{"i8": 1, "t": "x", "iv": "never"}`)}); !errors.Is(err, admin.ErrInvalid) {
		t.Fatalf("bad interval: %v", err)
	}
	res, err := admin.Enqueue(ctx, tx, k, admin.EnqueueRequest{Data: []byte(`{"i8": 2, "t": "y", "iv": "2 days"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	assertRows(t, "rows", queryRows(t, s, `SELECT format('%s %s %s %s', id, i8, t, iv) FROM typed`),
		[]string{"1 2 y 2 days"})
	if res.ID != 1 {
		t.Errorf("id %d, want 1", res.ID)
	}
}
