package admin

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is returned for input the package refuses: an unknown state name, a key for a kind
// without key, a limit out of range, job data that does not fit the kind's table. The message says
// what was wrong; the command line exits 1 with it and the dashboard answers 400.
var ErrInvalid = errors.New("admin: invalid")

// ErrJobNotFound is returned by GetJob for an id the kind's table does not hold.
var ErrJobNotFound = errors.New("admin: no such job")

// DataError lists every problem Enqueue found in a job's data, so that a person fixes them all at
// once. It matches ErrInvalid with errors.Is.
type DataError struct {
	// Kind is the kind's name.
	Kind string
	// Problems are in the order of the kind's columns, problems with the data as a whole first.
	Problems []Problem
}

// Problem is one thing wrong with a job's data.
type Problem struct {
	// Column is the column concerned; "" for a problem with the data as a whole (not JSON, not an
	// object).
	Column string
	// Type is the column's type as PostgreSQL writes it; "" when Column is not one of the kind's.
	Type string
	// Message says what is wrong and what the column takes.
	Message string
}

// String writes the problem as DataError's message does: `column "name" (type): message`.
func (p Problem) String() string {
	switch {
	case p.Column == "":
		return p.Message
	case p.Type == "":
		return fmt.Sprintf("column %q: %s", p.Column, p.Message)
	}
	return fmt.Sprintf("column %q (%s): %s", p.Column, p.Type, p.Message)
}

func (e *DataError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.String()
	}
	return fmt.Sprintf("%v data for kind %q: %s", ErrInvalid, e.Kind, strings.Join(msgs, "; "))
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *DataError) Is(target error) bool { return target == ErrInvalid }
