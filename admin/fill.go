package admin

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// A filler turns the JSON value of one column into the parameter that fills it, or says what is wrong
// with it ("" when nothing is). v is the value decoded with UseNumber, never nil (null is handled
// before); raw is its JSON text. The parameters are the Go types pgx encodes exactly for the column's
// type, or strings, which pgx sends as text for PostgreSQL to parse (json, numeric, interval).
type filler func(c Column, raw json.RawMessage, v any) (any, string)

// fillers are the column types Enqueue fills from JSON, by udt name.
var fillers = map[string]filler{
	"int2": fillInt(16), "int4": fillInt(32), "int8": fillInt(64),
	"float4": fillFloat(32), "float8": fillFloat(64), "numeric": fillNumeric,
	"text": fillText, "varchar": fillText, "bpchar": fillText, "citext": fillText,
	"bool": fillBool, "uuid": fillUUID,
	"timestamptz": fillTimestamptz, "timestamp": fillTimestamp, "date": fillDate, "interval": fillInterval,
	"json": fillJSON, "jsonb": fillJSON, "bytea": fillBytea,
	"_text": fillArray(fillText, "strings"), "_varchar": fillArray(fillText, "strings"),
	"_int8": fillArray(intElem(64), "integers"), "_int4": fillArray(intElem(32), "integers"),
	"_uuid": fillArray(fillUUID, "UUID strings"),
}

// show writes a value for a message: compact JSON, cut after 60 bytes.
func show(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	s := b.String()
	if len(s) > 60 {
		cut := 60
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// jsonKind names the JSON type of a value decoded with UseNumber.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func wrongKind(raw json.RawMessage, v any, want string) string {
	return fmt.Sprintf("%s is %s, not %s", show(raw), jsonKind(v), want)
}

func fillInt(bits int) filler {
	return func(c Column, raw json.RawMessage, v any) (any, string) {
		n, ok := v.(json.Number)
		if !ok {
			return nil, wrongKind(raw, v, "an integer")
		}
		i, problem := parseInt(string(n), bits)
		if problem != "" {
			return nil, show(raw) + problem
		}
		return i, ""
	}
}

// parseInt reads a JSON number that must be an integer of the given size. 1e3 and 2.0 are integers;
// 1.5 is not, and neither is "12" (a string: see fillInt).
func parseInt(s string, bits int) (int64, string) {
	lo, hi := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
	outOfRange := fmt.Sprintf(" is out of range (%d to %d)", lo, hi)
	if i, err := strconv.ParseInt(s, 10, bits); err == nil {
		return i, ""
	}
	d, ok := parseDecimal(s)
	if !ok {
		return 0, " is not a number"
	}
	if !d.isInt() {
		return 0, " is not an integer"
	}
	if d.digits == "" {
		return 0, ""
	}
	// Past 19 digits it cannot fit; checked first so that 1e999999 is never expanded.
	if len(d.digits)+d.exp > 19 {
		return 0, outOfRange
	}
	n := d.bigInt(0)
	if !n.IsInt64() || n.Int64() < lo || n.Int64() > hi {
		return 0, outOfRange
	}
	return n.Int64(), ""
}

// intElem is fillInt for an array's elements, as the slice types of typedArray hold them.
func intElem(bits int) filler {
	asInt64 := fillInt(bits)
	return func(c Column, raw json.RawMessage, v any) (any, string) {
		i, problem := asInt64(c, raw, v)
		if problem == "" && bits == 32 {
			return int32(i.(int64)), ""
		}
		return i, problem
	}
}

func fillFloat(bits int) filler {
	return func(_ Column, raw json.RawMessage, v any) (any, string) {
		n, ok := v.(json.Number)
		if !ok {
			return nil, wrongKind(raw, v, "a number")
		}
		f, err := strconv.ParseFloat(string(n), bits)
		if err != nil {
			largest := math.MaxFloat64
			if bits == 32 {
				largest = math.MaxFloat32
			}
			return nil, fmt.Sprintf("%s is out of range (the largest magnitude is %g)", show(raw), largest)
		}
		// ParseFloat rounds a number too close to zero to 0 without an error; PostgreSQL refuses it,
		// and storing 0 for it would change the job's data.
		if d, ok := parseDecimal(string(n)); f == 0 && ok && d.digits != "" {
			smallest := math.SmallestNonzeroFloat64
			if bits == 32 {
				smallest = math.SmallestNonzeroFloat32
			}
			return nil, fmt.Sprintf("%s is out of range (the smallest magnitude other than 0 is %g)", show(raw), smallest)
		}
		if bits == 32 {
			return float32(f), ""
		}
		return f, ""
	}
}

// fillText checks a string for a text-like column or array element: PostgreSQL text cannot hold NUL,
// and a varchar(n) or char(n) holds n characters (trailing spaces past n are cut, as PostgreSQL does).
func fillText(c Column, raw json.RawMessage, v any) (any, string) {
	s, ok := v.(string)
	if !ok {
		return nil, wrongKind(raw, v, "a string")
	}
	if strings.ContainsRune(s, 0) {
		return nil, show(raw) + ` contains the character \u0000, which PostgreSQL text cannot hold`
	}
	if (c.Type == "varchar" || c.Type == "bpchar" || c.Type == "_varchar" || c.Type == "_bpchar") && c.mod >= 4 {
		if n, max := utf8.RuneCountInString(strings.TrimRight(s, " ")), int(c.mod-4); n > max {
			return nil, fmt.Sprintf("%s is %d characters long; the column holds at most %d", show(raw), n, max)
		}
	}
	return s, ""
}

func fillBool(_ Column, raw json.RawMessage, v any) (any, string) {
	b, ok := v.(bool)
	if !ok {
		return nil, wrongKind(raw, v, "true or false")
	}
	return b, ""
}

var uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

const uuidExample = `"123e4567-e89b-12d3-a456-426614174000"`

// fillUUID takes the usual form, 8-4-4-4-12 hex digits (PostgreSQL reads others too, which a person
// rarely means), and gives the 16 bytes.
func fillUUID(_ Column, raw json.RawMessage, v any) (any, string) {
	s, ok := v.(string)
	if !ok {
		return nil, wrongKind(raw, v, "a UUID string such as "+uuidExample)
	}
	if !uuidPattern.MatchString(s) {
		return nil, fmt.Sprintf("%s is not a UUID such as %s", show(raw), uuidExample)
	}
	var u pgtype.UUID
	_, _ = hex.Decode(u.Bytes[:], []byte(strings.ReplaceAll(s, "-", ""))) // checked by the pattern
	u.Valid = true
	return u, ""
}

func fillTimestamptz(_ Column, raw json.RawMessage, v any) (any, string) {
	const want = `an RFC 3339 time such as "2024-05-01T12:00:00Z" or "2024-05-01T14:00:00+02:00"`
	s, ok := v.(string)
	if !ok {
		return nil, wrongKind(raw, v, want)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, fmt.Sprintf("%s is not %s", show(raw), want)
	}
	return t, ""
}

// fillTimestamp reads a time without time zone as written; one with an offset (RFC 3339) is
// converted to UTC, the convention for such columns, rather than having its offset ignored.
func fillTimestamp(_ Column, raw json.RawMessage, v any) (any, string) {
	const want = `a date and time such as "2024-05-01T12:00:00" (with an offset, as in "2024-05-01T12:00:00Z", it is converted to UTC)`
	s, ok := v.(string)
	if !ok {
		return nil, wrongKind(raw, v, want)
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), ""
	}
	t, err := time.Parse("2006-01-02T15:04:05.999999999", s)
	if err != nil {
		return nil, fmt.Sprintf("%s is not %s", show(raw), want)
	}
	return t, ""
}

func fillDate(_ Column, raw json.RawMessage, v any) (any, string) {
	const want = `a date such as "2024-05-01"`
	s, ok := v.(string)
	if !ok {
		return nil, wrongKind(raw, v, want)
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil || t.Year() < 1 {
		return nil, fmt.Sprintf("%s is not %s", show(raw), want)
	}
	return s, ""
}

// intervalExample is how intervals are written, for messages.
const intervalExample = `"1 hour 30 minutes", "01:30:00" or "PT1H30M"`

// fillInterval passes the string on: only PostgreSQL knows every way of writing an interval, so
// Enqueue asks it (see probeIntervals).
func fillInterval(_ Column, raw json.RawMessage, v any) (any, string) {
	s, ok := v.(string)
	if !ok {
		return nil, wrongKind(raw, v, "an interval string such as "+intervalExample)
	}
	return s, ""
}

// fillJSON takes any JSON value; null is SQL NULL, like in every column. jsonb cannot hold \u0000.
func fillJSON(c Column, raw json.RawMessage, v any) (any, string) {
	if c.Type == "jsonb" && hasNUL(v) {
		return nil, show(raw) + ` contains the character \u0000, which jsonb cannot hold`
	}
	return string(raw), ""
}

func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		for _, e := range v {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

// fillBytea reads base64, as encoding/json writes a []byte.
func fillBytea(_ Column, raw json.RawMessage, v any) (any, string) {
	s, ok := v.(string)
	if !ok {
		return nil, wrongKind(raw, v, "a base64 string (as encoding/json writes []byte)")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Sprintf("%s is not base64 (as encoding/json writes []byte): %v", show(raw), err)
	}
	return b, ""
}

// fillArray fills a one-dimensional array whose elements elem checks. A null element is NULL.
func fillArray(elem filler, what string) filler {
	return func(c Column, raw json.RawMessage, v any) (any, string) {
		list, ok := v.([]any)
		if !ok {
			return nil, wrongKind(raw, v, "an array of "+what)
		}
		elems := make([]any, len(list))
		for i, e := range list {
			if e == nil {
				continue
			}
			eraw := marshal(e)
			val, problem := elem(c, eraw, e)
			if problem != "" {
				return nil, fmt.Sprintf("element %d: %s", i+1, problem)
			}
			elems[i] = val
		}
		return typedArray(c.Type, elems), ""
	}
}

// marshal writes again a value decoded from JSON, for messages, leaving <, > and & as they are.
func marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a value decoded from JSON always encodes
	return bytes.TrimSpace(b.Bytes())
}

// typedArray makes the slice pgx encodes as the array type udt; nil elements become NULL.
func typedArray(udt string, elems []any) any {
	switch udt {
	case "_int8":
		return typed[int64](elems)
	case "_int4":
		return typed[int32](elems)
	case "_uuid":
		out := make([]pgtype.UUID, len(elems))
		for i, e := range elems {
			if e != nil {
				out[i] = e.(pgtype.UUID)
			}
		}
		return out
	}
	return typed[string](elems)
}

func typed[T any](elems []any) []*T {
	out := make([]*T, len(elems))
	for i, e := range elems {
		if e != nil {
			v := e.(T)
			out[i] = &v
		}
	}
	return out
}
