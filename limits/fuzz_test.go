package limits_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/limits"
)

// FuzzNormalizeKey feeds NormalizeKey key values for kinds of 0 to 3 key columns. A refused value
// gets an error matching ErrInvalid that names the value. An accepted one is what PostgreSQL's
// json_build_array(...)::text prints for a key of several columns: the same values, ", " between
// them, each string escaped as PostgreSQL's escape_json does (pgEscape). Normalising is idempotent.
func FuzzNormalizeKey(f *testing.F) {
	for _, seed := range []struct {
		cols  uint8
		value string
	}{
		{1, "42"}, {1, "acme"}, {1, ""}, {0, "42"},
		{2, `["acme", 42]`}, {2, `["acme",42]`}, {2, ` [ "a\"b" , -1.5e3 ] `}, {3, `[true, "x", 0]`},
		{2, `["tab\there", "\u0001\u001f\u007f"]`}, {2, `["\ud800", "\u00e9\/"]`},
		{2, `[1, 2] ]`}, {2, `[1, null]`}, {2, `[1, [2]]`}, {2, `{"a": 1}`}, {2, `[1]`}, {2, "not json"},
		{2, `["x\"; DROP TABLE y; --", 1]`},
	} {
		f.Add(seed.cols, seed.value)
	}
	f.Fuzz(func(t *testing.T, ncols uint8, value string) {
		cols := []string{"customer_id", "region", "tier"}[:ncols%4]
		got, err := limits.NormalizeKey(cols, value)
		if err != nil {
			if got != "" || !errors.Is(err, limits.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("key %q", value)) {
				t.Fatalf("NormalizeKey(%q, %q) = %q, %v; want an ErrInvalid naming the key", cols, value, got, err)
			}
			return
		}
		if len(cols) == 0 {
			t.Fatalf("NormalizeKey(no columns, %q) = %q; want an error", value, got)
		}
		if again, err := limits.NormalizeKey(cols, got); err != nil || again != got {
			t.Fatalf("NormalizeKey(%q, %q) = %q, normalised again: %q, %v", cols, value, got, again, err)
		}
		if len(cols) == 1 {
			if got != value {
				t.Fatalf("one-column key %q normalised to %q; want it unchanged", value, got)
			}
			return
		}
		in, out := decodeNumbers(t, value), decodeNumbers(t, got)
		if !reflect.DeepEqual(in, out) {
			t.Fatalf("NormalizeKey(%q) = %q: values %#v, want %#v", value, got, out, in)
		}
		parts := make([]string, len(out.([]any)))
		for i, v := range out.([]any) {
			if s, ok := v.(string); ok {
				parts[i] = pgEscape(s)
			} else {
				parts[i] = fmt.Sprint(v)
			}
		}
		if want := "[" + strings.Join(parts, ", ") + "]"; got != want {
			t.Fatalf("NormalizeKey(%q) = %q; PostgreSQL prints %q", value, got, want)
		}
	})
}

// decodeNumbers decodes JSON keeping numbers as written.
func decodeNumbers(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decoding %q: %v", s, err)
	}
	return v
}

// pgEscape writes s as PostgreSQL's escape_json (src/backend/utils/adt/json.c) does, byte by byte:
// the five short escapes, \uXXXX for the other bytes below 0x20, everything else as it is.
func pgEscape(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < ' ' {
				fmt.Fprintf(&b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
