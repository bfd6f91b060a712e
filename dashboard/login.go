package dashboard

import (
	"net/http"
)

// loginView is the login page.
type loginView struct {
	view
	// Token and Basic say which credentials the form asks for.
	Token, Basic bool
	// Open: the dashboard has no credentials, so there is nothing to log in with.
	Open bool
	Next string
	// Error says why the previous attempt failed.
	Error string
}

func (h *Handler) loginView(r *request, next, msg string) loginView {
	return loginView{
		view:  h.view(r.id, "Log in", r.flash),
		Token: h.cfg.Token != "", Basic: h.cfg.basicAuth(), Open: !h.cfg.hasCredentials(),
		Next: h.localPath(next, h.base+"/"), Error: msg,
	}
}

func (h *Handler) loginPage(w http.ResponseWriter, r *request) {
	h.render(w, r.Request, r.id, http.StatusOK, "login", h.loginView(r, r.URL.Query().Get("next"), ""))
}

// login checks the token, or the basic-auth user and password, typed into the form, and gives the
// browser a new logged-in session: a new id, so that a session cookie planted before the login (and
// its CSRF token) is worth nothing after it.
func (h *Handler) login(w http.ResponseWriter, r *request) {
	if !h.cfg.hasCredentials() {
		h.fail(w, r.Request, r.id, http.StatusBadRequest, "This dashboard has no credentials: there is nothing to log in with.")
		return
	}
	token, user, pass := r.PostForm.Get("token"), r.PostForm.Get("user"), r.PostForm.Get("password")
	good := false
	switch {
	case token != "" && h.cfg.Token != "":
		good = secretEqual(token, h.cfg.Token)
	case user != "" && h.cfg.basicAuth():
		good = h.basicAuthOK(user, pass)
	}
	next := r.PostForm.Get("next")
	if !good {
		h.log.Warn("dashboard: login failed", "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", h.challenge())
		h.render(w, r.Request, r.id, http.StatusUnauthorized, "login", h.loginView(r, next, "Those credentials are wrong."))
		return
	}
	s, err := newSession(true, h.cfg.SessionTTL)
	if err != nil {
		h.internal(w, r.Request, r.id, err)
		return
	}
	h.log.Info("dashboard: login", "remote", r.RemoteAddr)
	h.setSession(w, r.Request, s)
	h.setFlash(w, r.Request, flash{Message: "Logged in until " + formatTime(s.expires) + "."})
	http.Redirect(w, r.Request, h.localPath(next, h.base+"/"), http.StatusSeeOther)
}

// logout gives the browser a new anonymous session. The old session's cookie is replaced, not
// revoked: sessions are not stored, so a copy of the cookie would stay valid until it expires.
func (h *Handler) logout(w http.ResponseWriter, r *request) {
	s, err := newSession(false, h.cfg.SessionTTL)
	if err != nil {
		h.internal(w, r.Request, r.id, err)
		return
	}
	h.setSession(w, r.Request, s)
	h.setFlash(w, r.Request, flash{Message: "Logged out."})
	http.Redirect(w, r.Request, h.base+"/", http.StatusSeeOther)
}
