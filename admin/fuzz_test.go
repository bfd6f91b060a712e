package admin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// fuzzColumns is a column of every type Enqueue fills, with modifiers, and one it cannot fill.
var fuzzColumns = []Column{
	{Name: "i2", Type: "int2", SQLType: "smallint", mod: -1},
	{Name: "i4", Type: "int4", SQLType: "integer", mod: -1},
	{Name: "i8", Type: "int8", SQLType: "bigint", mod: -1},
	{Name: "f4", Type: "float4", SQLType: "real", mod: -1},
	{Name: "f8", Type: "float8", SQLType: "double precision", mod: -1},
	{Name: "num", Type: "numeric", SQLType: "numeric", mod: -1},
	{Name: "num52", Type: "numeric", SQLType: "numeric(5,2)", mod: 5<<16 | 2 + 4},
	{Name: "txt", Type: "text", SQLType: "text", mod: -1},
	{Name: "vc5", Type: "varchar", SQLType: "character varying(5)", mod: 5 + 4},
	{Name: "ch3", Type: "bpchar", SQLType: "character(3)", mod: 3 + 4},
	{Name: "b", Type: "bool", SQLType: "boolean", mod: -1},
	{Name: "u", Type: "uuid", SQLType: "uuid", mod: -1},
	{Name: "tstz", Type: "timestamptz", SQLType: "timestamp with time zone", mod: -1},
	{Name: "ts", Type: "timestamp", SQLType: "timestamp without time zone", mod: -1},
	{Name: "d", Type: "date", SQLType: "date", mod: -1},
	{Name: "iv", Type: "interval", SQLType: "interval", mod: -1},
	{Name: "j", Type: "json", SQLType: "json", mod: -1},
	{Name: "jb", Type: "jsonb", SQLType: "jsonb", mod: -1},
	{Name: "by", Type: "bytea", SQLType: "bytea", mod: -1},
	{Name: "at", Type: "_text", SQLType: "text[]", mod: -1},
	{Name: "avc", Type: "_varchar", SQLType: "character varying(5)[]", mod: 5 + 4},
	{Name: "a8", Type: "_int8", SQLType: "bigint[]", mod: -1},
	{Name: "a4", Type: "_int4", SQLType: "integer[]", mod: -1},
	{Name: "au", Type: "_uuid", SQLType: "uuid[]", mod: -1},
	{Name: "pt", Type: "point", SQLType: "point", mod: -1},
}

// FuzzFillValue feeds one column's JSON value to the filler of every column type. A value is either
// filled or refused, never both. A refusal is one line that names the value (or the element of an
// array, or says null is not allowed, or that the type cannot be filled). A filled value is the Go
// type pgx encodes for the column, and it is the value given: the same integer, float, string,
// instant or bytes, never a silently different one (a non-zero number never becomes 0).
func FuzzFillValue(f *testing.F) {
	for i, raw := range []string{`42`, `-32768`, `32768`, `2.0`, `1e3`, `1.5`, `"12"`, `1e999999999`, `-0`,
		`3.4e38`, `1e39`, `1.5e-3`, `123.455`, `999.995`, `"héllo"`, `"a\u0000b"`, `"abcde  "`, `"abcdef"`,
		`true`, `"123E4567-e89b-12d3-a456-426614174000"`, `"2024-05-01T12:00:00+02:00"`, `"2024-05-01T12:00:00"`,
		`"2024-02-30"`, `"0000-01-01"`, `"1 hour 30 minutes"`, `{"a": [1, "\u0000"]}`, `"aGVsbG8="`, `"aGVsbG8"`,
		`["a", null, "b"]`, `[1, 2.0, 3.5]`, `[2147483648]`, `["x"]`, `null`, `{}`, `[[1]]`} {
		f.Add(uint8(i), false, raw)
		f.Add(uint8(i+7), true, raw)
	}
	f.Fuzz(func(t *testing.T, which uint8, nullable bool, raw string) {
		if !json.Valid([]byte(raw)) || !utf8.ValidString(raw) {
			return // fillValue gets one member of data parseObject has checked
		}
		c := fuzzColumns[int(which)%len(fuzzColumns)]
		c.Nullable = nullable
		v, problem := fillValue(c, json.RawMessage(raw))
		if problem != "" {
			checkProblem(t, c, raw, v, problem)
			return
		}
		checkFilled(t, c, raw, v)
	})
}

// checkProblem checks a refusal: no value, one line, naming the value or saying what is wrong.
func checkProblem(t *testing.T, c Column, raw string, v any, problem string) {
	t.Helper()
	named := strings.HasPrefix(problem, show(json.RawMessage(raw))) || strings.HasPrefix(problem, "element ") ||
		strings.HasPrefix(problem, "null is not allowed") || strings.HasPrefix(problem, "enqueue cannot fill a column of type "+c.SQLType)
	if v != nil || strings.ContainsAny(problem, "\n\r") || !named {
		t.Fatalf("%s (%s) <- %s: value %#v, problem %q; want no value and a one-line problem naming the value", c.Name, c.SQLType, raw, v, problem)
	}
}

// checkFilled checks a filled value against the JSON it came from.
func checkFilled(t *testing.T, c Column, raw string, v any) {
	t.Helper()
	var decoded any
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	_ = dec.Decode(&decoded)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s (%s) <- %s = %#v: %s", c.Name, c.SQLType, raw, v, fmt.Sprintf(format, args...))
	}
	if decoded == nil {
		if v != nil || !c.Nullable {
			fail("null fills only a nullable column, with nil")
		}
		return
	}
	switch c.Type {
	case "int2", "int4", "int8":
		i, ok := v.(int64)
		if !ok || !sameInt(string(decoded.(json.Number)), i) {
			fail("want the integer written")
		}
	case "float4", "float8":
		var got float64
		switch x := v.(type) {
		case float32:
			got = float64(x)
		case float64:
			got = x
		default:
			fail("want a float")
		}
		if got == 0 && strings.Trim(mantissa(string(decoded.(json.Number))), "0.-") != "" {
			fail("a non-zero number became 0")
		}
		if math.IsInf(got, 0) || math.IsNaN(got) {
			fail("want a finite number")
		}
	case "numeric":
		if v != string(decoded.(json.Number)) {
			fail("want the number's text as written")
		}
	case "text", "varchar", "bpchar":
		if v != decoded {
			fail("want the string given")
		}
	case "bool":
		if v != decoded {
			fail("want the boolean given")
		}
	case "uuid":
		u, ok := v.(pgtype.UUID)
		if !ok || !u.Valid || uuidText(u) != strings.ToLower(decoded.(string)) {
			fail("want the UUID given")
		}
	case "timestamptz", "timestamp":
		tm, ok := v.(time.Time)
		back, err := time.Parse(time.RFC3339Nano, decoded.(string))
		if err != nil {
			back, err = time.Parse("2006-01-02T15:04:05.999999999", decoded.(string))
		}
		if !ok || err != nil || !tm.Equal(back) {
			fail("want the instant written")
		}
	case "date", "interval":
		if v != decoded {
			fail("want the text given, for PostgreSQL to read")
		}
	case "json", "jsonb":
		if v != raw {
			fail("want the JSON given")
		}
	case "bytea":
		b, ok := v.([]byte)
		want, _ := base64.StdEncoding.DecodeString(decoded.(string))
		if !ok || !bytes.Equal(b, want) {
			fail("want the bytes the base64 gives")
		}
	case "_text", "_varchar", "_int8", "_int4", "_uuid":
		elems := reflect.ValueOf(v)
		if elems.Kind() != reflect.Slice || elems.Len() != len(decoded.([]any)) {
			fail("want a slice of %d elements", len(decoded.([]any)))
		}
		for i, e := range decoded.([]any) {
			if isNil := elems.Index(i).IsZero(); (e == nil) != isNil {
				fail("element %d: want NULL exactly where null is given", i+1)
			}
		}
	default:
		fail("a column of type %s was filled", c.Type)
	}
}

// sameInt reports whether the JSON number s is the integer i, computed apart from the code under
// test with math/big (exponents beyond 400 only ever write 0 or a refused value).
func sameInt(s string, i int64) bool {
	m, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	if e, err := strconv.Atoi(exp); hasExp && (err != nil || e > 400 || e < -400) {
		return i == 0 && strings.Trim(m, "0.-") == ""
	}
	r, ok := new(big.Rat).SetString(s)
	return ok && r.IsInt() && r.Num().Cmp(big.NewInt(i)) == 0
}

// mantissa is a JSON number without its exponent.
func mantissa(s string) string {
	m, _, _ := strings.Cut(strings.ToLower(s), "e")
	return m
}

func uuidText(u pgtype.UUID) string {
	b := u.Bytes
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// fuzzKind is a kind of five columns: NOT NULL without default, NOT NULL with default, nullable.
var fuzzKind = &Kind{
	Info: &jobinfo.Info{Name: "fuzzed"},
	Columns: []Column{
		{Name: "customer_id", Type: "int8", SQLType: "bigint", mod: -1},
		{Name: "url", Type: "text", SQLType: "text", mod: -1},
		{Name: "tries", Type: "int4", SQLType: "integer", HasDefault: true, mod: -1},
		{Name: "payload", Type: "jsonb", SQLType: "jsonb", Nullable: true, mod: -1},
		{Name: "due", Type: "timestamptz", SQLType: "timestamp with time zone", Nullable: true, mod: -1},
	},
}

// FuzzEnqueueData feeds whole job data to fill, as Enqueue does before it writes anything. Either
// every problem is reported, each naming its column (one of the kind's, or the unknown key given), or
// none: then the columns to insert are the kind's in table order, each value checked, every NOT NULL
// column without default is among them, and every key given is inserted.
func FuzzEnqueueData(f *testing.F) {
	for _, data := range []string{
		`{"customer_id": 42, "url": "https://example.com/hook"}`,
		`{"customer_id": 42, "url": "x", "tries": 3, "payload": {"a": 1}, "due": "2024-05-01T12:00:00Z"}`,
		`{"customer_id": "42", "url": 7, "tries": null, "extra": 1}`,
		`{"customer_id": 1, "customer_id": 2, "url": "x"}`,
		`{"x\"; DROP TABLE y; --": 1}`, `{"id": 1, "process_after": "now", "lock_token": 0}`,
		`[1, 2]`, `"text"`, `null`, ``, `   `, `{`, "\xff", `{}`,
	} {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data string) {
		cols, values, problems := fill(fuzzKind, json.RawMessage(data))
		if len(problems) > 0 {
			err := (&DataError{Kind: "fuzzed", Problems: problems}).Error()
			if !strings.HasPrefix(err, `admin: invalid data for kind "fuzzed": `) {
				t.Fatalf("DataError %q", err)
			}
			var given map[string]any
			_ = json.Unmarshal([]byte(data), &given)
			last := -1
			for _, p := range problems {
				i := columnIndex(p.Column)
				switch {
				case p.Message == "":
					t.Fatalf("fill(%q): problem %+v says nothing", data, p)
				case p.Column == "":
					if len(problems) != 1 && !strings.HasPrefix(p.Message, `key "" (empty) is not a column of kind "fuzzed"`) {
						t.Fatalf("fill(%q): a problem with the data as a whole among others: %+v", data, problems)
					}
				case i < 0:
					if _, ok := given[p.Column]; !ok || p.Type != "" || !strings.HasPrefix(p.Message, "not ") {
						t.Fatalf("fill(%q): problem about column %q, which is neither the kind's nor given: %+v", data, p.Column, p)
					}
				case p.Type != fuzzKind.Columns[i].SQLType:
					t.Fatalf("fill(%q): problem %+v does not give its column's type", data, p)
				case p.Message != "given twice":
					if i < last {
						t.Fatalf("fill(%q): problems out of column order: %+v", data, problems)
					}
					last = i
				}
			}
			return
		}
		if len(cols) != len(values) {
			t.Fatalf("fill(%q): %d columns, %d values", data, len(cols), len(values))
		}
		var given map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &given); err != nil {
			t.Fatalf("fill(%q) accepted data that is not a JSON object: %v", data, err)
		}
		last := -1
		for _, c := range cols {
			i := columnIndex(c.Name)
			if i <= last {
				t.Fatalf("fill(%q): columns %v out of table order", data, cols)
			}
			last = i
		}
		for _, c := range fuzzKind.Columns {
			_, in := given[c.Name]
			if !c.Nullable && !c.HasDefault && !in {
				t.Fatalf("fill(%q) accepted data without NOT NULL column %s", data, c.Name)
			}
			if in && columnIndexIn(cols, c.Name) < 0 {
				t.Fatalf("fill(%q): column %s was given but is not inserted", data, c.Name)
			}
		}
	})
}

func columnIndex(name string) int { return columnIndexIn(fuzzKind.Columns, name) }

func columnIndexIn(cols []Column, name string) int {
	for i, c := range cols {
		if c.Name == name {
			return i
		}
	}
	return -1
}
