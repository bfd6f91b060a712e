package dashboard_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobpipe/jobpipe/dashboard"
)

// Changes with no credentials are served on loopback only; credentials or read-only allow any
// address.
func TestCheckListen(t *testing.T) {
	t.Parallel()
	open := dashboard.Config{}
	for _, tc := range []struct {
		name string
		cfg  dashboard.Config
		addr string
		ok   bool
	}{
		{"open on 127.0.0.1", open, "127.0.0.1:8080", true},
		{"open on another loopback address", open, "127.0.0.2:8080", true},
		{"open on ::1", open, "[::1]:8080", true},
		{"open on localhost", open, "localhost:8080", true},
		{"open on LOCALHOST", open, "LOCALHOST:8080", true},
		{"open on every interface", open, ":8080", false},
		{"open on 0.0.0.0", open, "0.0.0.0:8080", false},
		{"open on ::", open, "[::]:8080", false},
		{"open on a LAN address", open, "192.168.1.10:8080", false},
		{"open on a host name", open, "ops.example.com:8080", false},
		{"open on a name that starts like localhost", open, "localhost.example.com:8080", false},
		{"open without port", open, "127.0.0.1", false},
		{"token on every interface", dashboard.Config{Token: testToken}, ":8080", true},
		{"basic auth on every interface", dashboard.Config{BasicAuthUser: testUser, BasicAuthPassword: testPassword}, ":8080", true},
		{"read-only on every interface", dashboard.Config{ReadOnly: true}, ":8080", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.CheckListen(tc.addr)
			if tc.ok {
				if err != nil {
					t.Fatalf("CheckListen(%q): %v", tc.addr, err)
				}
				return
			}
			if !errors.Is(err, dashboard.ErrConfig) {
				t.Fatalf("CheckListen(%q) = %v, want ErrConfig", tc.addr, err)
			}
			t.Log(err)
		})
	}
	// The message says how to fix it.
	err := open.CheckListen(":9000")
	for _, want := range []string{"no credentials", "token", "read-only", "127.0.0.1:9000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q: %v", want, err)
		}
	}
}

// New refuses a configuration that is incomplete or unsafe, naming every problem.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		cfg  dashboard.Config
		want string
	}{
		{"no database", dashboard.Config{}, "DB is nil"},
		{"short token", dashboard.Config{DB: f.s.Pool, Token: "secret"}, "Token has 6 characters, want at least 16"},
		{"user without password", dashboard.Config{DB: f.s.Pool, BasicAuthUser: "ops"}, "set both or neither"},
		{"short password", dashboard.Config{DB: f.s.Pool, BasicAuthUser: "ops", BasicAuthPassword: "pw"}, "BasicAuthPassword has 2 characters"},
		{"colon in user", dashboard.Config{DB: f.s.Pool, BasicAuthUser: "a:b", BasicAuthPassword: testPassword}, "contains ':'"},
		{"protected reads without credentials", dashboard.Config{DB: f.s.Pool, RequireAuthForReads: true}, "RequireAuthForReads needs credentials"},
		{"base path with trailing slash", dashboard.Config{DB: f.s.Pool, BasePath: "/ops/"}, "BasePath"},
		{"relative base path", dashboard.Config{DB: f.s.Pool, BasePath: "ops"}, "BasePath"},
		{"negative session TTL", dashboard.Config{DB: f.s.Pool, SessionTTL: -1}, "SessionTTL"},
		{"origin without scheme", dashboard.Config{DB: f.s.Pool, TrustedOrigins: []string{"ops.example.com"}}, "TrustedOrigins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dashboard.New(tc.cfg)
			if !errors.Is(err, dashboard.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}
