package testenv

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// isURL reports whether connString is in URL form rather than libpq's key=value form.
func isURL(connString string) bool {
	return strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://")
}

// withSearchPath returns connString changed so that every connection made from it, by pgx, psql
// or any libpq program, starts with search_path set to schema only. It uses the startup
// parameter "options" ("-csearch_path=..."), keeping any options already there.
// schema must already be a plain identifier (see schemaName): it is not quoted.
func withSearchPath(connString, schema string) (string, error) {
	opt := "-csearch_path=" + schema
	if !isURL(connString) {
		// key=value form: a second "options" would replace the first, losing its settings.
		if regexp.MustCompile(`(^|\s)options\s*=`).MatchString(connString) {
			return "", errors.New("testenv: a key=value connection string that sets options is not supported; use the URL form")
		}
		return strings.TrimSpace(connString) + " options='" + opt + "'", nil
	}
	u, err := url.Parse(connString)
	if err != nil {
		return "", fmt.Errorf("testenv: parse connection URL: %w", err)
	}
	q := u.Query()
	if old := q.Get("options"); old != "" {
		opt = old + " " + opt
	}
	q.Set("options", opt)
	// Encode writes a space as "+", which libpq and pgx read as a plus sign; a literal "+"
	// is already "%2B", so every "+" left is a space.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String(), nil
}

var dsnPassword = regexp.MustCompile(`(password\s*=\s*)('(\\.|[^'])*'|\S+)`)

// redact hides the password of a connection string (URL or key=value form) for logs.
func redact(connString string) string {
	if !strings.Contains(connString, "://") {
		return dsnPassword.ReplaceAllString(connString, "${1}xxxxx")
	}
	u, err := url.Parse(connString)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
