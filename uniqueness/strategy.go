package uniqueness

import (
	"errors"
	"fmt"
)

// Strategy says what enqueueing a duplicate of a waiting job does.
type Strategy int

const (
	// Skip leaves the waiting job as it is and returns its id, with Result.Duplicate set. The default.
	Skip Strategy = iota
	// Replace overwrites the waiting job's data columns and process_after with the new job's.
	Replace
	// ReplaceData overwrites the waiting job's data columns and keeps its process_after.
	ReplaceData
	// ReplaceSchedule overwrites the waiting job's process_after and keeps its data: the debounce that
	// pushes a pending job back each time it is enqueued again.
	ReplaceSchedule
	// Error leaves the waiting job as it is and returns a *DuplicateError naming it.
	Error
)

var strategyNames = map[Strategy]string{
	Skip: "skip", Replace: "replace", ReplaceData: "replace-data", ReplaceSchedule: "replace-schedule", Error: "error",
}

// String returns the strategy's name as ParseStrategy reads it.
func (s Strategy) String() string {
	if name, ok := strategyNames[s]; ok {
		return name
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// ParseStrategy reads a strategy name: skip, replace, replace-data, replace-schedule or error.
func ParseStrategy(name string) (Strategy, error) {
	for s, n := range strategyNames {
		if n == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("uniqueness: on-duplicate strategy %q is unknown: use skip, replace, replace-data, replace-schedule or error", name)
}

// ErrDuplicate matches every *DuplicateError with errors.Is.
var ErrDuplicate = errors.New("uniqueness: duplicate of a waiting job")

// DuplicateError is returned by the Error strategy: a job with the same unique fields is waiting.
type DuplicateError struct {
	// Kind is the kind's name.
	Kind string
	// ExistingID is the id of the waiting job.
	ExistingID int64
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("uniqueness: kind %q already has waiting job %d with the same unique fields", e.Kind, e.ExistingID)
}

// Is makes errors.Is(err, ErrDuplicate) true.
func (e *DuplicateError) Is(target error) bool { return target == ErrDuplicate }
