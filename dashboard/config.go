package dashboard

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jobpipe/jobpipe/jobinfo"
)

// MinSecretLength is the shortest token or basic-auth password accepted: shorter ones can be guessed
// through the login form. `openssl rand -hex 32` makes a good token.
const MinSecretLength = 16

// DefaultSessionTTL is how long a login lasts unless Config.SessionTTL says otherwise.
const DefaultSessionTTL = 12 * time.Hour

// ErrConfig is returned by New and CheckListen for a configuration that is incomplete or unsafe.
var ErrConfig = errors.New("dashboard: invalid configuration")

// Config configures the dashboard. Only DB is required; with no credentials and ReadOnly false,
// anyone who reaches the dashboard can change jobs, which CheckListen allows on loopback only.
type Config struct {
	// DB is the database the dashboard reads and changes, with jobpipe's migrations applied and the
	// kinds' tables on its search path. Required.
	DB jobinfo.DB
	// Token lets a client change things: as "Authorization: Bearer <token>", or typed into the login
	// form, which then keeps a session cookie. At least MinSecretLength characters. Default: none.
	Token string
	// BasicAuthUser and BasicAuthPassword, when both are set, let a client change things with HTTP
	// basic authentication or through the login form. The password has at least MinSecretLength
	// characters. Default: none.
	BasicAuthUser     string
	BasicAuthPassword string
	// ReadOnly hides every action and refuses every POST with 403, whatever the credentials.
	ReadOnly bool
	// RequireAuthForReads makes every page need the same authentication as a change (the job data
	// may be private). It needs credentials. Default false: reading is open to whoever reaches the
	// dashboard. Handlers served beside the dashboard (metrics) are not covered: see
	// Handler.RequireAuth.
	RequireAuthForReads bool
	// BasePath is the path the dashboard is mounted under, "/ops/jobs" for example, with no trailing
	// slash; the handler strips it from requests and prefixes it to its links. Default "" (the root).
	BasePath string
	// SessionTTL is how long a login through the form lasts. Default DefaultSessionTTL.
	SessionTTL time.Duration
	// SecureCookies marks cookies Secure even when the request did not arrive over TLS: set it behind
	// a proxy that terminates TLS. Requests over TLS always get Secure cookies.
	SecureCookies bool
	// TrustedOrigins are origins ("https://ops.example.com") allowed to POST although they differ from
	// the request's Host, for a proxy that rewrites Host. Default: none, only same-origin POSTs.
	TrustedOrigins []string
	// Logger receives the audit record of every change and the errors behind 500 responses.
	// Default slog.Default().
	Logger *slog.Logger
}

// hasCredentials reports whether any way to authenticate is configured.
func (c Config) hasCredentials() bool {
	return c.Token != "" || c.basicAuth()
}

func (c Config) basicAuth() bool {
	return c.BasicAuthUser != "" && c.BasicAuthPassword != ""
}

// open reports whether changes are allowed to anyone: no credentials and not read-only. CheckListen
// limits that to loopback, and the handler then answers loopback Host names only.
func (c Config) open() bool {
	return !c.ReadOnly && !c.hasCredentials()
}

// validate checks what New needs, naming each problem and its fix.
func (c Config) validate() error {
	var problems []string
	if c.DB == nil {
		problems = append(problems, "DB is nil: give the pool of the database that holds the jobs")
	}
	if c.Token != "" && len(c.Token) < MinSecretLength {
		problems = append(problems, fmt.Sprintf("Token has %d characters, want at least %d: make one with `openssl rand -hex 32`",
			len(c.Token), MinSecretLength))
	}
	if (c.BasicAuthUser == "") != (c.BasicAuthPassword == "") {
		problems = append(problems, "BasicAuthUser and BasicAuthPassword go together: set both or neither")
	}
	if c.BasicAuthPassword != "" && len(c.BasicAuthPassword) < MinSecretLength {
		problems = append(problems, fmt.Sprintf("BasicAuthPassword has %d characters, want at least %d",
			len(c.BasicAuthPassword), MinSecretLength))
	}
	if strings.Contains(c.BasicAuthUser, ":") {
		problems = append(problems, "BasicAuthUser contains ':', which basic authentication cannot carry")
	}
	if c.RequireAuthForReads && !c.hasCredentials() {
		problems = append(problems, "RequireAuthForReads needs credentials: set Token or BasicAuthUser and BasicAuthPassword")
	}
	if c.BasePath != "" && (!strings.HasPrefix(c.BasePath, "/") || strings.HasSuffix(c.BasePath, "/") ||
		strings.ContainsAny(c.BasePath, "?#\\ \"'<>")) {
		problems = append(problems, fmt.Sprintf("BasePath %q: want a path such as /ops/jobs, starting with / and without a trailing /", c.BasePath))
	}
	if c.SessionTTL < 0 {
		problems = append(problems, fmt.Sprintf("SessionTTL %v is negative: leave it 0 for the default %v", c.SessionTTL, DefaultSessionTTL))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(problems, "; "))
	}
	return nil
}

// CheckListen reports whether serving the dashboard on addr (host:port, as given to net.Listen) is
// safe: changes enabled with no credentials are refused unless addr is a loopback address
// (127.0.0.1, ::1, localhost), so that an open dashboard is never reachable from the network.
// Call it before listening.
func (c Config) CheckListen(addr string) error {
	if !c.open() {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: listen address %q: %v; want host:port, 127.0.0.1:8080 for example", ErrConfig, addr, err)
	}
	if isLoopback(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return fmt.Errorf("%w: the dashboard would let anyone change jobs on %s (%s): it has no credentials and is not read-only; "+
		"set a token (Config.Token, at least %d characters) or basic auth, or make it read-only, "+
		"or bind it to a loopback address such as 127.0.0.1%s",
		ErrConfig, addr, shown, MinSecretLength, portOf(addr))
}

// isLoopback reports whether host names this machine only: localhost or a loopback IP address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func portOf(addr string) string {
	if _, port, err := net.SplitHostPort(addr); err == nil && port != "" {
		return ":" + port
	}
	return ":8080"
}
