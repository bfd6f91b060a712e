package dashboard

import (
	"net/http"
	"strings"
)

// identity is who sent a request, as far as the dashboard can tell.
type identity struct {
	// authenticated: the request may change things (unless the dashboard is read-only).
	authenticated bool
	// via names how: "token", "basic", "session", "open" (no credentials configured) or "".
	via string
	// csrfID is what the request's CSRF token is computed from; "" when it has none. A request
	// authenticated with a bearer token needs none (see checkCSRF).
	csrfID string
	// session is the request's valid session cookie, if hasSession.
	session    session
	hasSession bool
	// badCredentials: the request carried an Authorization header that is wrong. It is refused
	// rather than treated as anonymous, so that a client with a mistyped token learns it at once.
	badCredentials bool
}

// identify reads the request's credentials: an Authorization header (bearer token or basic auth)
// first, then the session cookie.
func (h *Handler) identify(r *http.Request) identity {
	var id identity
	id.session, id.hasSession = h.readSession(r)
	if id.hasSession {
		id.csrfID = id.session.csrfID()
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		switch {
		case h.cfg.Token != "" && hasScheme(auth, "Bearer"):
			if secretEqual(strings.TrimSpace(auth[len("Bearer "):]), h.cfg.Token) {
				id.authenticated, id.via, id.csrfID = true, "token", ""
				return id
			}
		case h.cfg.basicAuth() && hasScheme(auth, "Basic"):
			if user, pass, ok := r.BasicAuth(); ok && h.basicAuthOK(user, pass) {
				// A browser sends basic credentials with every request, a forged one included:
				// the CSRF token is bound to them.
				id.authenticated, id.via, id.csrfID = true, "basic", "basic:"+user
				return id
			}
		}
		id.badCredentials = true
		return id
	}
	switch {
	case id.hasSession && id.session.auth:
		id.authenticated, id.via = true, "session"
	case h.cfg.open():
		id.authenticated, id.via = true, "open"
	}
	return id
}

// basicAuthOK compares both parts in constant time, and always both, so that timing does not tell
// whether the user name was right.
func (h *Handler) basicAuthOK(user, pass string) bool {
	userOK := secretEqual(user, h.cfg.BasicAuthUser)
	passOK := secretEqual(pass, h.cfg.BasicAuthPassword)
	return userOK && passOK
}

func hasScheme(auth, scheme string) bool {
	return len(auth) > len(scheme) && strings.EqualFold(auth[:len(scheme)], scheme) && auth[len(scheme)] == ' '
}

// challenge is the WWW-Authenticate header of a 401 response.
func (h *Handler) challenge() string {
	if h.cfg.basicAuth() {
		return `Basic realm="jobpipe dashboard", charset="UTF-8"`
	}
	return `Bearer realm="jobpipe dashboard"`
}

// RequireAuth wraps next, a handler served beside the dashboard (its Prometheus metrics, say), so
// that it answers only requests authenticated with the dashboard's credentials: the token as
// "Authorization: Bearer <token>", basic authentication, or a session from the dashboard's login form
// (when its cookie reaches next's path). Any other request gets 401 with the dashboard's challenge.
// Without credentials in the Config every request is refused: a dashboard open on loopback has nothing
// to check them against.
func (h *Handler) RequireAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := h.identify(r)
		if !id.authenticated || id.via == "open" {
			w.Header().Set("WWW-Authenticate", h.challenge())
			http.Error(w, "authentication required: send the dashboard's bearer token or basic auth", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
