package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agnivade/levenshtein"

	"github.com/jobpipe/jobpipe/admin"
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
	kinds, err := admin.Kinds(ctx, db)
	if err != nil {
		return nil
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name()
	}
	return names
}

// closestKind returns the name in names nearest to kind in edit distance, if it is near enough to
// be a typing slip (at most 2 edits, or a third of the name's length), else "". Ties go to the first
// name.
func closestKind(kind string, names []string) string {
	kind = strings.ToLower(kind)
	best, bestDist := "", max(2, len(kind)/3)+1
	for _, n := range names {
		if d := levenshtein.ComputeDistance(kind, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}
