package cli

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobpipe/jobpipe/internal/testenv"
)

func TestDatabaseURLPrecedence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, flag, envVar string
		want               databaseURL
	}{
		{name: "flag wins", flag: "postgres://f/x", envVar: "postgres://e/x", want: databaseURL{"postgres://f/x", "--database-url"}},
		{name: "environment", envVar: "postgres://e/x", want: databaseURL{"postgres://e/x", "DATABASE_URL"}},
		{name: "default", want: databaseURL{defaultDatabaseURL, "the default"}},
	} {
		e := &env{Getenv: func(k string) string {
			if k == "DATABASE_URL" {
				return tc.envVar
			}
			return ""
		}}
		if got := e.databaseURL(tc.flag); got != tc.want {
			t.Errorf("%s: databaseURL = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestMalformedURLNeverShowsThePassword(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{
			url: "postgres://%zz",
			want: `the database URL (from DATABASE_URL) is malformed: failed to parse as URL (invalid percent-encoded token: "%zz"); ` +
				"write it as postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=disable",
		},
		{
			url:  "postgres://jo:s3cret@127.0.0.1:notaport/x",
			want: "the database URL (from DATABASE_URL) is malformed: invalid port; write it as postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=disable",
		},
		{
			url:  "host=127.0.0.1 password=s3cret sslmode=sometimes",
			want: "the database URL (from DATABASE_URL) is malformed: failed to configure TLS (sslmode is invalid); write it as postgres://USER:PASSWORD@HOST:5432/DATABASE?sslmode=disable",
		},
	} {
		_, err := databaseURL{tc.url, "DATABASE_URL"}.poolConfig()
		if err == nil || err.Error() != tc.want {
			t.Errorf("poolConfig(%q) err =\n%v\nwant\n%s", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("poolConfig(%q) shows the password: %v", tc.url, err)
		}
	}
}

func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]time.Duration{
		"postgres://127.0.0.1/x":                   connectTimeout,
		"postgres://127.0.0.1/x?connect_timeout=2": 2 * time.Second,
	} {
		cfg, err := databaseURL{url, "--database-url"}.poolConfig()
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.ConnConfig.ConnectTimeout; got != want {
			t.Errorf("%s: ConnectTimeout = %s, want %s", url, got, want)
		}
	}
}

func TestConnectErrors(t *testing.T) {
	t.Parallel()
	s := testenv.NewSchema(t)
	// A role that does not exist, on the test server: it answers and refuses.
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Skipf("the test server's connection string is not a URL: %v", err)
	}
	u.User = url.User("no_such_role_for_jobpipe_tests")
	refused := u.String()
	cfg, err := databaseURL{refused, ""}.poolConfig()
	if err != nil {
		t.Fatal(err)
	}
	addr := cfg.ConnConfig.Host + ":" + strconv.Itoa(int(cfg.ConnConfig.Port))

	for _, tc := range []struct {
		url              string
		prefix, contains string
		suffix           string
	}{
		{
			url:    "postgres://127.0.0.1:1/x",
			prefix: "PostgreSQL at 127.0.0.1:1 is unreachable (URL from --database-url): dial tcp 127.0.0.1:1: connect: connection refused; ",
			suffix: "start PostgreSQL at 127.0.0.1:1 or point --database-url or DATABASE_URL at a running server",
		},
		{
			url:      refused,
			prefix:   "PostgreSQL at " + addr + " refused the connection (URL from --database-url): FATAL: ",
			contains: "no_such_role_for_jobpipe_tests",
			suffix:   "; check the user, password and database name in the URL",
		},
	} {
		e := &env{Getenv: func(string) string { return "" }}
		pool, err := e.connect(context.Background(), tc.url)
		if err == nil {
			pool.Close()
			t.Fatalf("connect(%s) succeeded", tc.url)
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, tc.prefix) || !strings.HasSuffix(msg, tc.suffix) || !strings.Contains(msg, tc.contains) {
			t.Errorf("connect(%s) err =\n%s\nwant %q ... %q ... %q", tc.url, msg, tc.prefix, tc.contains, tc.suffix)
		}
	}
}
