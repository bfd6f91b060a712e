package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jobpipe/jobpipe/admin"
	"github.com/jobpipe/jobpipe/jobinfo"
	"github.com/jobpipe/jobpipe/limits"
)

// Bounds on what a form may carry.
const (
	// maxIDs is the most jobs one action changes: a page of the job list, with room to spare.
	maxIDs = 1000
	// maxKeyBytes bounds a key value; real keys are ids and names, far shorter.
	maxKeyBytes = 1024
	// maxReasonBytes bounds the reason given for discarding jobs.
	maxReasonBytes = 500
)

// inputError is a request the dashboard refuses with status and a message that says what to fix.
type inputError struct {
	status int
	msg    string
}

func (e *inputError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &inputError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &inputError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

// answerError answers err: an inputError or an error of admin or limits the client caused with its
// status and message, anything else as a 500.
func (h *Handler) answerError(w http.ResponseWriter, r *request, err error) {
	var ie *inputError
	switch {
	case errors.As(err, &ie):
		h.fail(w, r.Request, r.id, ie.status, ie.msg)
	case errors.Is(err, admin.ErrUnknownKind), errors.Is(err, admin.ErrJobNotFound), errors.Is(err, admin.ErrTableMissing):
		h.fail(w, r.Request, r.id, http.StatusNotFound, err.Error())
	case errors.Is(err, admin.ErrInvalid), errors.Is(err, limits.ErrInvalid):
		h.fail(w, r.Request, r.id, http.StatusBadRequest, err.Error())
	default:
		h.internal(w, r.Request, r.id, err)
	}
}

// loadKind returns the kind named in the path, or a 404 error.
func (h *Handler) loadKind(ctx context.Context, name string) (*admin.Kind, error) {
	if jobinfo.ValidateName("kind", name) != nil {
		return nil, notFound("There is no kind named %q.", name)
	}
	k, err := admin.LoadKind(ctx, h.cfg.DB, name)
	if errors.Is(err, admin.ErrUnknownKind) {
		return nil, notFound("There is no kind named %q: a kind appears here once a dispatcher has registered it.", name)
	}
	return k, err
}

// parseID parses a job id: a positive integer.
func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("Job id %q is not a positive integer.", truncate(40, s))
	}
	return id, nil
}

// parseIDs parses the form's job ids, dropping repeats.
func parseIDs(values []string) ([]int64, error) {
	if len(values) == 0 {
		return nil, badRequest("No job was selected: tick at least one job.")
	}
	if len(values) > maxIDs {
		return nil, badRequest("%d jobs were selected; one action changes at most %d.", len(values), maxIDs)
	}
	ids := make([]int64, 0, len(values))
	seen := make(map[int64]bool, len(values))
	for _, v := range values {
		id, err := parseID(v)
		if err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// parseLimit parses a limit between 0 and upper.
func parseLimit(what, s string, upper int) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, badRequest("Give the %s: a whole number from 0 (halt) to %d.", what, upper)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > int64(upper) {
		return 0, badRequest("The %s %q is out of range: give a whole number from 0 (halt) to %d.", what, truncate(40, s), upper)
	}
	return int(n), nil
}

// parseKey checks a key value and returns it as limits stores it.
func parseKey(k *admin.Kind, s string) (string, error) {
	switch {
	case len(k.Info.Key) == 0:
		return "", badRequest("Kind %q has no key, so it has no per-key limits or pauses.", k.Name())
	case s == "":
		return "", badRequest("Give a key value.")
	case len(s) > maxKeyBytes:
		return "", badRequest("The key is %d bytes long; keys are at most %d.", len(s), maxKeyBytes)
	case !utf8.ValidString(s):
		return "", badRequest("The key is not valid UTF-8 text.")
	case strings.ContainsRune(s, 0):
		return "", badRequest("The key contains a NUL character, which no key value can hold.")
	}
	norm, err := limits.NormalizeKey(k.Info.Key, s)
	if err != nil {
		return "", badRequest("%s", err.Error())
	}
	return norm, nil
}

// parseReason checks the reason given for discarding jobs.
func parseReason(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case len(s) > maxReasonBytes:
		return "", badRequest("The reason is %d bytes long; at most %d.", len(s), maxReasonBytes)
	case !utf8.ValidString(s), strings.ContainsRune(s, 0):
		return "", badRequest("The reason must be text without NUL characters.")
	}
	return s, nil
}

// localPath returns back when it is a path of this dashboard, else fallback: a redirect never
// leaves the dashboard, whatever the form says.
func (h *Handler) localPath(back, fallback string) string {
	u, err := url.Parse(back)
	if back == "" || err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, h.base+"/") || strings.HasPrefix(u.Path, "//") ||
		strings.ContainsAny(back, "\\\r\n\t") {
		return fallback
	}
	return u.RequestURI()
}
