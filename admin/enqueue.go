package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// EnqueueRequest is one job to enqueue from JSON.
type EnqueueRequest struct {
	// Data is a JSON object whose keys are data columns of the kind (see Enqueue).
	Data json.RawMessage
	// ProcessAfter, when set, is the earliest time the job may start.
	ProcessAfter *time.Time
	// ProcessIn, when positive, delays the job by this long from the database's clock. Give
	// ProcessAfter or ProcessIn, not both.
	ProcessIn time.Duration
	// OnDuplicate is what happens when a job with the same unique fields has not started yet, as in
	// package uniqueness (default Skip).
	OnDuplicate uniqueness.Strategy
}

// Enqueue inserts one job of kind k from JSON data, as the application would through the kind's Go
// type: through package uniqueness, so OnDuplicate behaves exactly as there, and dispatchers are woken
// when it commits.
//
// Data must be a JSON object. Every key must be a data column of the kind; every column that is NOT
// NULL and has no default must be given. Columns left out get their default, or NULL (which Replace
// then writes over the waiting job's value; a column with a default keeps the waiting job's value). A
// JSON null is SQL NULL and is refused for a NOT NULL column. Each value must suit its column's type:
//
//   - smallint, integer, bigint: a JSON integer in range (2.0 and 1e3 are integers; 1.5 and "12" are not)
//   - real, double precision: a JSON number in range
//   - numeric: a JSON number, kept digit for digit; numeric(p,s) is checked as PostgreSQL rounds
//   - text, varchar, char, citext: a string; varchar(n) and char(n) hold n characters
//   - boolean: true or false
//   - uuid: a string such as "123e4567-e89b-12d3-a456-426614174000"
//   - timestamptz: an RFC 3339 string; timestamp: the same without offset, or with one (converted to
//     UTC); date: "YYYY-MM-DD"
//   - interval: a string PostgreSQL reads, such as "1 hour 30 minutes" or "PT1H30M"
//   - json, jsonb: any JSON value
//   - bytea: a base64 string, as encoding/json writes a []byte
//   - text[], varchar[], bigint[], integer[], uuid[]: a JSON array of such values (null elements are NULL)
//
// A column of any other type can be left out or set to null when it allows that, never filled. Nothing
// is written unless every value is right: the problems are all reported at once in a *DataError, which
// matches ErrInvalid. So are the errors PostgreSQL raises for the data (classes 22 and 23: a CHECK or
// foreign key constraint, say), naming the column where it can be told. A duplicate refused by the
// Error strategy is uniqueness's *DuplicateError.
func Enqueue(ctx context.Context, db jobinfo.DB, k *Kind, r EnqueueRequest) (uniqueness.Result, error) {
	if err := r.check(); err != nil {
		return uniqueness.Result{}, err
	}
	cols, values, problems := fill(k, r.Data)
	more, err := probeIntervals(ctx, db, cols, values)
	if err != nil {
		return uniqueness.Result{}, fmt.Errorf("admin: checking the intervals of a kind %q job: %w", k.Name(), err)
	}
	problems = append(problems, more...)
	if len(problems) == 0 && len(cols) == 0 {
		problems = append(problems, Problem{Message: "the data gives no column and every column has a default: give at least one"})
	}
	if len(problems) > 0 {
		return uniqueness.Result{}, &DataError{Kind: k.Name(), Problems: problems}
	}
	// An Info of the columns given: the insert leaves the others to their defaults.
	info := *k.Info
	info.Fields = make([]jobinfo.Field, len(cols))
	for i, c := range cols {
		for _, f := range k.Info.Fields {
			if f.Column == c.Name {
				info.Fields[i] = f
			}
		}
	}
	row := uniqueness.Row{Values: values, ProcessAfter: r.ProcessAfter, ProcessIn: r.ProcessIn}
	res, err := uniqueness.New(&info).Insert(ctx, db, row, r.OnDuplicate)
	if err != nil {
		return res, insertError(k, cols, values, err)
	}
	return res, nil
}

func (r EnqueueRequest) check() error {
	var errs []error
	if r.ProcessAfter != nil && r.ProcessIn != 0 {
		errs = append(errs, fmt.Errorf("%w schedule: give a start time or a delay, not both", ErrInvalid))
	}
	if r.ProcessIn < 0 {
		errs = append(errs, fmt.Errorf("%w delay %v: give 0 or more", ErrInvalid, r.ProcessIn))
	}
	if _, err := uniqueness.ParseStrategy(r.OnDuplicate.String()); err != nil {
		errs = append(errs, fmt.Errorf("%w on-duplicate strategy %v: use skip, replace, replace-data, replace-schedule or error", ErrInvalid, r.OnDuplicate))
	}
	return errors.Join(errs...)
}

// fill reads the data and returns the columns to insert, in table order, with their values, or every
// problem found.
func fill(k *Kind, data json.RawMessage) ([]Column, []any, []Problem) {
	given, problems := parseObject(k, data)
	if given == nil {
		return nil, nil, problems
	}
	var cols []Column
	var values []any
	for _, c := range k.Columns {
		raw, ok := given[c.Name]
		if !ok {
			switch {
			case c.HasDefault:
			case c.Nullable:
				// Named with NULL rather than left out, so that Replace writes NULL over the old value.
				cols, values = append(cols, c), append(values, nil)
			default:
				problems = append(problems, Problem{c.Name, c.SQLType, "missing: the column is NOT NULL and has no default"})
			}
			continue
		}
		v, problem := fillValue(c, raw)
		if problem != "" {
			problems = append(problems, Problem{c.Name, c.SQLType, problem})
			continue
		}
		cols, values = append(cols, c), append(values, v)
	}
	return cols, values, problems
}

// parseObject splits the data into its members, or says why it cannot: not UTF-8, not JSON, not an
// object, a key that is not a data column or given twice.
func parseObject(k *Kind, data json.RawMessage) (map[string]json.RawMessage, []Problem) {
	whole := func(format string, args ...any) []Problem {
		return []Problem{{Message: fmt.Sprintf(format, args...)}}
	}
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		return nil, whole("the data is empty: give a JSON object with the kind's columns (%s) as keys", columnNames(k))
	case !utf8.Valid(data):
		return nil, whole("the data is not valid UTF-8")
	case !json.Valid(data):
		var v any
		err := json.Unmarshal(data, &v)
		return nil, whole("the data is not valid JSON: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		var v any
		_ = json.Unmarshal(data, &v)
		return nil, whole("the data is %s, not a JSON object with the kind's columns (%s) as keys", jsonKind(v), columnNames(k))
	}
	given := map[string]json.RawMessage{}
	var problems []Problem
	for dec.More() {
		tok, _ := dec.Token() // valid JSON: an object's key
		key := tok.(string)
		var raw json.RawMessage
		_ = dec.Decode(&raw)
		c, ok := k.Column(key)
		_, twice := given[key]
		switch {
		case !ok && twice: // reported once
		case !ok && key == "":
			// A Problem without Column is about the data as a whole: this one names the key itself.
			problems = append(problems, Problem{Message: `key "" (empty) is ` + unknownColumn(k, key)})
		case !ok:
			problems = append(problems, Problem{Column: key, Message: unknownColumn(k, key)})
		case twice:
			problems = append(problems, Problem{key, c.SQLType, "given twice"})
		}
		given[key] = raw
	}
	return given, problems
}

func unknownColumn(k *Kind, name string) string {
	switch {
	case name == "process_after":
		return "not job data: give the start time as ProcessAfter or ProcessIn (--at or --in on the command line)"
	case isPipelineColumn(name):
		return "not job data: jobpipe sets it"
	}
	return fmt.Sprintf("not a column of kind %q; its columns are %s", k.Name(), columnNames(k))
}

// columnNames lists the data columns with their types: "customer_id bigint, url text".
func columnNames(k *Kind) string {
	names := make([]string, len(k.Columns))
	for i, c := range k.Columns {
		names[i] = c.Name + " " + c.SQLType
	}
	return strings.Join(names, ", ")
}

// fillValue checks one column's value and returns the parameter that fills it.
func fillValue(c Column, raw json.RawMessage) (any, string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	_ = dec.Decode(&v) // part of valid JSON
	if v == nil {
		switch {
		case c.Nullable:
			return nil, ""
		case c.HasDefault:
			return nil, "null is not allowed: the column is NOT NULL (leave it out for its default)"
		}
		return nil, "null is not allowed: the column is NOT NULL"
	}
	f, ok := fillers[c.Type]
	if !ok {
		return nil, fmt.Sprintf("enqueue cannot fill a column of type %s from JSON: enqueue such jobs from Go or SQL", c.SQLType)
	}
	return f(c, raw, v)
}

// probeIntervals asks PostgreSQL to read each interval given (PostgreSQL alone knows all the ways of
// writing one), each in a transaction of its own (a savepoint when db is one) so that a refusal aborts
// nothing of the caller's. Only the columns without a problem so far are in cols.
func probeIntervals(ctx context.Context, db jobinfo.DB, cols []Column, values []any) ([]Problem, error) {
	var problems []Problem
	for i, c := range cols {
		s, ok := values[i].(string)
		if c.Type != "interval" || !ok {
			continue
		}
		tx, err := db.Begin(ctx)
		if err != nil {
			return nil, err
		}
		var ok2 bool
		err = tx.QueryRow(ctx, probeIntervalSQL, s).Scan(&ok2)
		_ = tx.Rollback(ctx)
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22"):
			problems = append(problems, Problem{c.Name, c.SQLType,
				fmt.Sprintf("%s is not an interval PostgreSQL reads (%s): write it like %s", show(marshal(s)), pgErr.Message, intervalExample)})
		case err != nil:
			return nil, err
		}
	}
	return problems, nil
}

// insertError translates what PostgreSQL refused about the data (classes 22 and 23) into a DataError
// naming the column: PostgreSQL names it for a NOT NULL violation; otherwise it is the one column
// whose type or value the message names, when there is one.
func insertError(k *Kind, cols []Column, values []any, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !(strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23")) {
		return err
	}
	msg := pgErr.Message
	// "Failing row contains (...)" would repeat every value of the row: too long, and maybe private.
	if pgErr.Detail != "" && !strings.HasPrefix(pgErr.Detail, "Failing row contains") {
		msg += ": " + strings.TrimSuffix(pgErr.Detail, ".")
	}
	p := Problem{Column: pgErr.ColumnName, Message: "PostgreSQL refused it: " + msg}
	if p.Column == "" {
		var named []Column
		for i, c := range cols {
			s, isString := values[i].(string)
			typeNamed := strings.Contains(pgErr.Message, "type "+c.SQLType+":") || strings.HasSuffix(pgErr.Message, "type "+c.SQLType) ||
				c.Type == "jsonb" && strings.Contains(pgErr.Message, "type json") // jsonb's input errors say json
			if values[i] != nil && (typeNamed || isString && strings.Contains(pgErr.Message, `"`+s+`"`)) {
				named = append(named, c)
			}
		}
		if len(named) == 1 {
			p.Column = named[0].Name
		}
	}
	if c, ok := k.Column(p.Column); ok {
		p.Type = c.SQLType
	}
	if p.Column == "" {
		p.Message = "PostgreSQL refused the job: " + msg
	}
	return &DataError{Kind: k.Name(), Problems: []Problem{p}}
}
