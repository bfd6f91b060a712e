package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// fuzzRow has a field of each kind of Go type a job's data may have, so that every column decoder is
// fuzzed.
type fuzzRow struct {
	Account string          `jobpipe:"account"`
	Count   int32           `jobpipe:"count"`
	Big     int64           `jobpipe:"big"`
	Ratio   float64         `jobpipe:"ratio"`
	Flag    bool            `jobpipe:"flag"`
	At      time.Time       `jobpipe:"at"`
	Wait    time.Duration   `jobpipe:"wait"`
	Note    *string         `jobpipe:"note"`
	Limits  map[string]int  `jobpipe:"limits"`
	Tags    []string        `jobpipe:"tags"`
	Raw     json.RawMessage `jobpipe:"raw"`
	Blob    []byte          `jobpipe:"blob"`
	UUID    [16]byte        `jobpipe:"uuid"`
	Meta    struct {
		A int
		B string
	} `jobpipe:"meta"`
	Pause *time.Duration `jobpipe:"pause"`
}

// fuzzRowColumns are the columns of fuzzRow's table as a claim returns them: their type and a value
// PostgreSQL would send for each, in text format.
var fuzzRowColumns = []struct {
	oid  uint32
	text string
}{
	{pgtype.TextOID, "acct"}, {pgtype.Int4OID, "7"}, {pgtype.Int8OID, "9000000000"}, {pgtype.Float8OID, "0.5"},
	{pgtype.BoolOID, "t"}, {pgtype.TimestamptzOID, "2024-05-01 12:00:00+00"}, {pgtype.IntervalOID, "01:30:00"},
	{pgtype.TextOID, ""}, {pgtype.JSONBOID, `{"a": 1}`}, {pgtype.TextArrayOID, "{x,y}"}, {pgtype.JSONBOID, "[1]"},
	{pgtype.ByteaOID, `\x0102`}, {pgtype.UUIDOID, "123e4567-e89b-12d3-a456-426614174000"},
	{pgtype.JSONBOID, `{"A": 1, "B": "b"}`}, {pgtype.IntervalOID, "00:00:01"},
}

// FuzzDecodeRow feeds a claimed row's decoder (the one Register builds for the kind's Go type) one
// column of arbitrary content, in text or binary format, or NULL, the other columns being valid. It
// never panics, which would take the dispatcher down with every job it runs. A column that does not
// decode gives an error that names that column, which becomes the failed job's last error. A column
// that decodes survives a round trip: encoded as PostgreSQL would send it and decoded again, it is the
// same value.
func FuzzDecodeRow(f *testing.F) {
	for i, c := range fuzzRowColumns {
		f.Add(uint8(i), false, false, []byte(c.text))
		f.Add(uint8(i), false, true, []byte(nil))
	}
	for i, bad := range []string{"x", "99999999999", "1e400", "NaN", "maybe", "infinity", "1 mon 2 days",
		"-infinity", `{"a": "not a number"}`, `{"a": 1.5}`, "[1, 2]", "{x,NULL}", `\xzz`, "123e4567", `{"A": "1"}`, "{"} {
		f.Add(uint8(i), false, false, []byte(bad))
	}
	f.Add(uint8(6), true, false, []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0}) // an interval of 1 day
	f.Add(uint8(9), true, false, []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1})
	d := &Dispatcher{shared: &shared{cfg: Config{Concurrency: 1}}, kinds: map[string]*kindRunner{}}
	kind := jobinfo.MustDefine[fuzzRow]("fuzz_row")
	if err := Register(d, kind, func(context.Context, *Job[fuzzRow]) error { return nil }); err != nil {
		f.Fatal(err)
	}
	decode := d.kinds["fuzz_row"].decode
	m := pgtype.NewMap()
	fds := make([]pgconn.FieldDescription, len(fuzzRowColumns))
	for i, c := range fuzzRowColumns {
		fds[i] = pgconn.FieldDescription{Name: kind.Info().Fields[i].Column, DataTypeOID: c.oid, Format: pgtype.TextFormatCode}
	}
	f.Fuzz(func(t *testing.T, col uint8, binary, null bool, data []byte) {
		i := int(col) % len(fuzzRowColumns)
		row := make([][]byte, len(fuzzRowColumns))
		for j, c := range fuzzRowColumns {
			row[j] = []byte(c.text)
		}
		row[7] = nil // note is NULL unless fuzzed
		row[i] = data
		if null {
			row[i] = nil
		}
		fields := append([]pgconn.FieldDescription(nil), fds...)
		if binary {
			fields[i].Format = pgtype.BinaryFormatCode
		}
		column := fields[i].Name
		v, err := decode(m, fields, row)
		if err != nil {
			if v != nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("column %q: ", column)) {
				t.Fatalf("decode(%s = %q) = %v, %q; want an error naming column %q", column, data, v, err, column)
			}
			return
		}
		job := v.(*fuzzRow)
		value := reflect.ValueOf(job).Elem().Field(i)
		encoded, err := m.Encode(fields[i].DataTypeOID, fields[i].Format, value.Interface(), []byte{}) // non-nil: empty is not NULL
		if err != nil {
			t.Fatalf("%s = %q decoded to %#v, which does not encode again: %v", column, data, value.Interface(), err)
		}
		row[i] = encoded
		again, err := decode(m, fields, row)
		if err != nil {
			t.Fatalf("%s = %q decoded to %#v, encoded as %q, which does not decode: %v", column, data, value.Interface(), encoded, err)
		}
		if second := reflect.ValueOf(again).Elem().Field(i).Interface(); !sameValue(value.Interface(), second) {
			t.Fatalf("%s = %q decoded to %#v, encoded as %q, decoded again to %#v", column, data, value.Interface(), encoded, second)
		}
	})
}

// sameValue compares decoded values: instants by Equal, NaN equal to itself, the rest deeply.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case time.Time:
		return x.Equal(b.(time.Time))
	case float64:
		y := b.(float64)
		return x == y || math.IsNaN(x) && math.IsNaN(y)
	}
	return reflect.DeepEqual(a, b)
}
