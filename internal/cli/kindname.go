package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// placedError is a failure reported under the command or subcommand it happened in ("jobs list"),
// as usage errors are, without the usage.
type placedError struct {
	where string
	err   error
}

func (e *placedError) Error() string { return e.err.Error() }
func (e *placedError) Unwrap() error { return e.err }

// unknownKind rewrites err, when it says that kind is not registered, for the command line: under
// the command where, with the registered kind closest to kind suggested. Other errors pass unchanged.
func unknownKind(ctx context.Context, db jobinfo.DB, where, kind string, err error) error {
	if !errors.Is(err, limits.ErrUnknownKind) {
		return err
	}
	msg := fmt.Sprintf("unknown kind %q: ", kind)
	if near := closestKind(kind, registeredKinds(ctx, db)); near != "" {
		msg += fmt.Sprintf("did you mean %s? (`jobpipe kinds` lists the registered kinds)", near)
	} else {
		msg += "no kind of that name is registered; a dispatcher registers its kinds when it starts, and a migration " +
			"written by `jobpipe kind new` registers its kind when applied (`jobpipe kinds` lists them)"
	}
	return &placedError{where: where, err: &wrapped{msg, err}}
}

// registeredKinds lists the registered kinds' names; none when they cannot be read, as a suggestion
// is only a help.
func registeredKinds(ctx context.Context, db jobinfo.DB) []string {
	rows, err := db.Query(ctx, `SELECT name FROM jobpipe_kinds ORDER BY name`)
	if err != nil {
		return nil
	}
	names, _ := pgx.CollectRows(rows, pgx.RowTo[string])
	return names
}

// closestKind returns the name in names nearest to kind in edit distance, if it is near enough to
// be a typing slip (at most 2 edits, or a third of the name's length), else "". Ties go to the first
// name.
func closestKind(kind string, names []string) string {
	kind = strings.ToLower(kind)
	best, bestDist := "", max(2, len(kind)/3)+1
	for _, n := range names {
		if d := editDistance(kind, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, counted in bytes: kind names are ASCII.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
