package admin

import (
	"context"
	"fmt"
	"testing"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

// fits agrees with PostgreSQL's numeric(p,s) on every value and type below, rounding included.
func TestNumericFitsAsPostgreSQL(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	ctx := context.Background()
	values := []string{"0", "-0", "0.00000", "1", "-1", "999.994", "999.995", "-999.995", "999.99", "1000", "0.005", "0.0049",
		"0.0050", "99999", "99950", "99949.99", "1e2", "1E+2", "12345e-2", "9.9999e2", "9.99949e2", "1e-1000", "5e-3", "-4.9e-3",
		"123456789012345678901234567890", "0.1", "10", "9.5", "9.4999"}
	for _, typ := range [][2]int{{5, 2}, {3, 0}, {1, 0}, {4, 4}, {3, -2}, {2, 3}, {10, 5}} {
		sqlType := fmt.Sprintf("numeric(%d,%d)", typ[0], typ[1])
		for _, v := range values {
			d, ok := parseDecimal(v)
			if !ok {
				t.Fatalf("parseDecimal(%q) failed", v)
			}
			var out string
			err := s.Pool.QueryRow(ctx, "SELECT $1::text::"+sqlType+"::text", v).Scan(&out)
			if got, want := d.fits(typ[0], typ[1]), err == nil; got != want {
				t.Errorf("%s fits %s = %t; PostgreSQL says %q, %v", v, sqlType, got, out, err)
			}
		}
	}
}

func TestNumericMod(t *testing.T) {
	t.Parallel()
	// atttypmod as PostgreSQL writes it: ((precision << 16) | (scale & 0x7ff)) + 4.
	for _, tt := range []struct {
		mod        int32
		p, s       int
		restricted bool
	}{
		{-1, 0, 0, false},
		{(5<<16 | 2) + 4, 5, 2, true},
		{(3<<16 | (-2 & 0x7ff)) + 4, 3, -2, true},
		{(1000<<16 | 1000) + 4, 1000, 1000, true},
	} {
		p, s, ok := numericMod(tt.mod)
		if p != tt.p || s != tt.s || ok != tt.restricted {
			t.Errorf("numericMod(%d) = %d, %d, %t; want %d, %d, %t", tt.mod, p, s, ok, tt.p, tt.s, tt.restricted)
		}
	}
}
