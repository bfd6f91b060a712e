package admin

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
)

// maxNumericExponent is the largest exponent PostgreSQL's numeric input takes (NUMERIC_MAX_PRECISION).
const maxNumericExponent = 1000

// fillNumeric keeps the number's digits as written: PostgreSQL parses them, exactly. The precision
// and scale of a numeric(p,s) are checked here, as PostgreSQL would, so that the message names the
// column.
func fillNumeric(c Column, raw json.RawMessage, v any) (any, string) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, wrongKind(raw, v, "a number")
	}
	d, ok := parseDecimal(string(n))
	if !ok {
		return nil, show(raw) + " is not a number"
	}
	if d.litExp > maxNumericExponent || d.litExp < -maxNumericExponent {
		return nil, fmt.Sprintf("%s is out of range: PostgreSQL takes exponents from -%d to %d", show(raw), maxNumericExponent, maxNumericExponent)
	}
	if p, s, ok := numericMod(c.mod); ok && !d.fits(p, s) {
		return nil, fmt.Sprintf("%s is out of range: it must round to an absolute value less than 10^%d", show(raw), p-s)
	}
	return string(n), ""
}

// numericMod decodes the type modifier of numeric(p,s) as PostgreSQL encodes it: ((p << 16) | s) + 4,
// the scale in 11 bits with its sign.
func numericMod(mod int32) (precision, scale int, ok bool) {
	if mod < 4 {
		return 0, 0, false
	}
	x := mod - 4
	return int(x>>16) & 0xffff, int(((x & 0x7ff) ^ 1024) - 1024), true
}

// decimal is a JSON number as sign, digits and exponent: digits × 10^exp, digits without leading
// zeros ("" for zero). litExp is the exponent as written after e/E.
type decimal struct {
	neg         bool
	digits      string
	exp, litExp int
}

var numberPattern = regexp.MustCompile(`^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$`)

func parseDecimal(s string) (decimal, bool) {
	m := numberPattern.FindStringSubmatch(s)
	if m == nil {
		return decimal{}, false
	}
	var d decimal
	if m[4] != "" {
		e, err := strconv.Atoi(m[4])
		if err != nil || e > 1<<30 || e < -(1<<30) {
			// Absurd exponents: keep them far out of every range without overflowing an int.
			e = 1 << 30
			if strings.HasPrefix(m[4], "-") {
				e = -e
			}
		}
		d.litExp = e
	}
	d.neg = m[1] == "-"
	d.digits = strings.TrimLeft(m[2]+m[3], "0")
	d.exp = d.litExp - len(m[3])
	return d, true
}

func (d decimal) isInt() bool {
	if d.digits == "" || d.exp >= 0 {
		return true
	}
	// Integral when the digits after the point are all zeros.
	return -d.exp <= len(d.digits) && strings.Trim(d.digits[len(d.digits)+d.exp:], "0") == ""
}

// bigInt returns the value times 10^shift, rounded half away from zero as PostgreSQL rounds numerics.
// The caller bounds the exponents, so the powers of ten stay small.
func (d decimal) bigInt(shift int) *big.Int {
	n, _ := new(big.Int).SetString("0"+d.digits, 10)
	e := d.exp + shift
	ten := big.NewInt(10)
	if e >= 0 {
		n.Mul(n, new(big.Int).Exp(ten, big.NewInt(int64(e)), nil))
	} else {
		div := new(big.Int).Exp(ten, big.NewInt(int64(-e)), nil)
		q, r := new(big.Int).QuoRem(n, div, new(big.Int))
		if r.Lsh(r, 1).Cmp(div) >= 0 {
			q.Add(q, big.NewInt(1))
		}
		n = q
	}
	if d.neg {
		n.Neg(n)
	}
	return n
}

// fits reports whether the value rounded to scale decimals has at most precision-scale digits before
// the point: what numeric(precision, scale) accepts.
func (d decimal) fits(precision, scale int) bool {
	if d.digits == "" {
		return true
	}
	intDigits := len(d.digits) + d.exp // digits before the point, or minus the zeros after it
	switch {
	case intDigits > precision-scale+1:
		return false // too large even after rounding
	case intDigits < -scale-1:
		return true // rounds to zero
	}
	n := d.bigInt(scale)
	return n.Abs(n).Cmp(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(precision)), nil)) < 0
}
