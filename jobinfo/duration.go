package jobinfo

import (
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// durationTarget scans an interval or bigint column into a time.Duration field. pgx's own conversion
// multiplies an interval out in int64 without a check, so an interval beyond time.Duration's range
// (about 292 years) would become an arbitrary duration; this refuses it, and the job fails with the
// reason instead of running with wrong data. A month counts 30 days and a day 24 hours, as
// PostgreSQL's extract(epoch from ...) counts them.
type durationTarget struct {
	dst     *time.Duration
	nullDst **time.Duration // set instead of dst for a *time.Duration field: NULL makes it nil
}

// SkipUnderlyingTypePlan keeps pgx from scanning into the field as a plain int64.
func (d durationTarget) SkipUnderlyingTypePlan() {}

// ScanInterval implements pgtype.IntervalScanner.
func (d durationTarget) ScanInterval(v pgtype.Interval) error {
	if !v.Valid {
		return d.setNull()
	}
	us := new(big.Int).Mul(big.NewInt(int64(v.Months)), big.NewInt(30*24*int64(time.Hour/time.Microsecond)))
	us.Add(us, new(big.Int).Mul(big.NewInt(int64(v.Days)), big.NewInt(24*int64(time.Hour/time.Microsecond))))
	us.Add(us, big.NewInt(v.Microseconds))
	if !us.IsInt64() || us.Int64() > math.MaxInt64/1000 || us.Int64() < math.MinInt64/1000 {
		return fmt.Errorf("the interval of %d months, %d days and %d microseconds does not fit a time.Duration (at most about 292 years)",
			v.Months, v.Days, v.Microseconds)
	}
	return d.set(time.Duration(us.Int64()) * time.Microsecond)
}

// ScanInt64 implements pgtype.Int64Scanner: a bigint column holds the duration in nanoseconds.
func (d durationTarget) ScanInt64(v pgtype.Int8) error {
	if !v.Valid {
		return d.setNull()
	}
	return d.set(time.Duration(v.Int64))
}

func (d durationTarget) set(v time.Duration) error {
	if d.nullDst != nil {
		*d.nullDst = &v
		return nil
	}
	*d.dst = v
	return nil
}

func (d durationTarget) setNull() error {
	if d.nullDst != nil {
		*d.nullDst = nil
		return nil
	}
	return fmt.Errorf("NULL cannot be a time.Duration: make the field a *time.Duration, or the column NOT NULL")
}

// scanTarget is the scan target of one field: the field's address, or a durationTarget for a
// time.Duration field.
func scanTarget(field any) any {
	switch p := field.(type) {
	case *time.Duration:
		return durationTarget{dst: p}
	case **time.Duration:
		return durationTarget{nullDst: p}
	}
	return field
}
