package dashboard_test

import (
	"net/http"
	"strings"
	"testing"
)

// Every input is checked on the server: a bad one gets 400 or 404 with a message saying what was
// wrong, and the database is left as it was.
func TestInvalidInputChangesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, csrf := loggedIn(t, f.handler(t, withToken))
	long := strings.Repeat("k", 1025)

	for _, tc := range []struct {
		name   string
		path   string
		form   []string
		status int
		want   string
	}{
		{"id not a number", "/kinds/webhook/actions/retry", []string{"id", "abc"}, 400, `Job id "abc" is not a positive integer.`},
		{"id zero", "/kinds/webhook/actions/retry", []string{"id", "0"}, 400, `Job id "0" is not a positive integer.`},
		{"id negative", "/kinds/webhook/actions/discard", []string{"id", "-5"}, 400, `Job id "-5" is not a positive integer.`},
		{"id with exponent", "/kinds/webhook/actions/run-now", []string{"id", "1e3"}, 400, `Job id "1e3" is not a positive integer.`},
		{"id too large", "/kinds/webhook/actions/retry", []string{"id", "99999999999999999999"}, 400, "is not a positive integer"},
		{"one bad id among good ones", "/kinds/webhook/actions/retry", []string{"id", "5", "id", "4; DROP TABLE webhook"}, 400, "is not a positive integer"},
		{"no id", "/kinds/webhook/actions/retry", nil, 400, "No job was selected"},
		{"ids in the query string only", "/kinds/webhook/actions/retry?id=5", nil, 400, "No job was selected"},
		{"too many ids", "/kinds/webhook/actions/retry", manyIDs(1001), 400, "1001 jobs were selected; one action changes at most 1000."},
		{"discard reason too long", "/kinds/webhook/actions/discard", []string{"id", "1", "reason", strings.Repeat("r", 501)}, 400, "The reason is 501 bytes long"},
		{"unknown kind", "/kinds/nosuch/actions/pause", nil, 404, `There is no kind named "nosuch"`},
		{"kind name that is no name", "/kinds/Web%20hook%27;--/actions/pause", nil, 404, "There is no kind named"},
		{"unknown action", "/kinds/webhook/actions/drop", nil, 404, `There is no action "drop".`},
		{"negative limit", "/kinds/webhook/actions/set-max-running", []string{"value", "-1"}, 400, `The total limit "-1" is out of range: give a whole number from 0 (halt) to 2147483647.`},
		{"limit over the column", "/kinds/webhook/actions/set-max-running", []string{"value", "2147483648"}, 400, "out of range"},
		{"limit not a number", "/kinds/webhook/actions/set-max-running", []string{"value", "ten"}, 400, "out of range"},
		{"limit fractional", "/kinds/webhook/actions/set-max-running", []string{"value", "2.5"}, 400, "out of range"},
		{"limit missing", "/kinds/webhook/actions/set-max-running", nil, 400, "Give the total limit"},
		{"per-key limit over the slots", "/kinds/webhook/actions/set-key-limit", []string{"value", "1025"}, 400, "from 0 (halt) to 1024"},
		{"per-key limit of a kind without key", "/kinds/cleanup/actions/set-key-limit", []string{"value", "2"}, 400, `Kind "cleanup" has no key`},
		{"key of a kind without key", "/kinds/cleanup/actions/pause-key", []string{"key", "42"}, 400, `Kind "cleanup" has no key`},
		{"empty key", "/kinds/webhook/actions/pause-key", []string{"key", ""}, 400, "Give a key value."},
		{"key with NUL", "/kinds/webhook/actions/pause-key", []string{"key", "4\x002"}, 400, "NUL"},
		{"key not UTF-8", "/kinds/webhook/actions/pause-key", []string{"key", "\xff\xfe"}, 400, "not valid UTF-8"},
		{"key too long", "/kinds/webhook/actions/set-key", []string{"key", long, "value", "1"}, 400, "The key is 1025 bytes long"},
		{"key of two columns not JSON", "/kinds/tenant_sync/actions/pause-key", []string{"key", "acme"}, 400, "not JSON"},
		{"key of two columns with one value", "/kinds/tenant_sync/actions/pause-key", []string{"key", `["acme"]`}, 400, "1 values for the 2 key columns"},
		{"key of two columns with null", "/kinds/tenant_sync/actions/pause-key", []string{"key", `["acme", null]`}, 400, "never null"},
		{"key limit out of range", "/kinds/webhook/actions/set-key", []string{"key", "42", "value", "100000"}, 400, "from 0 (halt) to 1024"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.snapshot(t)
			rec := c.post(tc.path, form(append([]string{"csrf_token", csrf}, tc.form...)...))
			if rec.Code != tc.status || !strings.Contains(errorMessage(rec), tc.want) {
				t.Errorf("status %d, want %d with %q:\n%s", rec.Code, tc.status, tc.want, errorMessage(rec))
			}
			if after := f.snapshot(t); after != before {
				t.Errorf("the database changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// Bad paths and query parameters of the pages get 400 or 404 with a message.
func TestInvalidPageRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := newClient(t, f.handler(t, withToken))
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/kinds/nosuch", 404, `There is no kind named "nosuch"`},
		{"/kinds/nosuch/jobs/1", 404, `There is no kind named "nosuch"`},
		{"/kinds/webhook/jobs/abc", 404, `There is no job "abc"`},
		{"/kinds/webhook/jobs/0", 404, `There is no job "0"`},
		{"/kinds/webhook/jobs/999", 404, `kind "webhook" has no job 999`},
		{"/kinds/webhook?state=dead", 400, `Unknown state "dead"`},
		{"/kinds/webhook?before=x", 400, `Job id "x" is not a positive integer.`},
		{"/kinds/webhook?key=%00", 400, "NUL"},
		{"/kinds/cleanup?key=1", 400, `Kind "cleanup" has no key`},
		{"/kinds/tenant_sync?key=acme", 400, "not JSON"},
		{"/nothing/here", 404, "There is no page at /nothing/here."},
		{"/static/", 404, ""},
	} {
		rec := c.get(tc.path)
		if rec.Code != tc.status || !strings.Contains(errorMessage(rec), tc.want) {
			t.Errorf("GET %s: %d, want %d with %q:\n%s", tc.path, rec.Code, tc.status, tc.want, errorMessage(rec))
		}
	}
	// Only GET and POST where they belong.
	if rec := c.do(http.MethodDelete, "/kinds/webhook", nil); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d, want 405", rec.Code)
	}
	if rec := c.get("/kinds/webhook/actions/retry"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET of an action: %d, want 405", rec.Code)
	}
}

func manyIDs(n int) []string {
	out := make([]string, 0, 2*n)
	for i := range n {
		out = append(out, "id", strings.Repeat("1", 1+i%9))
	}
	return out
}
