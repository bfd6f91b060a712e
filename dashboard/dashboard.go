package dashboard

import (
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
)

// Handler is the dashboard: an http.Handler serving its pages, its JSON endpoint and its embedded
// assets under Config.BasePath.
type Handler struct {
	cfg   Config
	base  string
	keys  keys
	log   *slog.Logger
	mux   *http.ServeMux
	cop   *http.CrossOriginProtection
	pages map[string]*template.Template
}

// New returns the dashboard for cfg, or ErrConfig naming what is missing or unsafe. It does not
// check the listen address: call cfg.CheckListen before serving.
func New(cfg Config) (*Handler, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	k, err := newKeys(cfg)
	if err != nil {
		return nil, err
	}
	cop := http.NewCrossOriginProtection()
	for _, o := range cfg.TrustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("%w: TrustedOrigins: %v", ErrConfig, err)
		}
	}
	pages, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, base: cfg.BasePath, keys: k, log: cfg.Logger, cop: cop, pages: pages}
	h.routes()
	return h, nil
}

// routes registers every path; the handlers in between (page, api, action) apply authentication
// and CSRF checks, so no route can forget them.
func (h *Handler) routes() {
	m := http.NewServeMux()
	m.Handle("GET /static/", h.static())
	m.HandleFunc("GET /{$}", h.page(h.overview))
	m.HandleFunc("GET /api/summary", h.api(h.summaryAPI))
	m.HandleFunc("GET /kinds/{kind}", h.page(h.kindPage))
	m.HandleFunc("GET /kinds/{kind}/jobs/{id}", h.page(h.jobPage))
	m.HandleFunc("POST /kinds/{kind}/actions/{action}", h.action(h.kindAction))
	m.HandleFunc("GET /login", h.page(h.loginPage))
	m.HandleFunc("POST /login", h.post(h.login))
	m.HandleFunc("POST /logout", h.post(h.logout))
	// Errors as pages rather than the mux's plain text. Methods other than GET on a path with no
	// route still get the mux's 404 or 405.
	m.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, h.identify(r), http.StatusNotFound, "There is no page at "+r.URL.Path+".")
	})
	m.HandleFunc("GET /kinds/{kind}/actions/{action}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		h.fail(w, r, h.identify(r), http.StatusMethodNotAllowed, "Actions are POSTed by the dashboard's forms.")
	})
	h.mux = m
}

// ServeHTTP serves a request for a path under Config.BasePath.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if h.base != "" {
		rest, ok := strings.CutPrefix(r.URL.Path, h.base)
		switch {
		case !ok || (rest != "" && !strings.HasPrefix(rest, "/")):
			http.NotFound(w, r)
			return
		case rest == "":
			http.Redirect(w, r, h.base+"/", http.StatusSeeOther)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path, u.RawPath = rest, ""
		r2.URL = &u
		r = r2
	}
	// With no credentials anyone who reaches the dashboard can change jobs, which CheckListen allows
	// on loopback only. A page of another site could still reach it through DNS rebinding (its
	// name resolving to 127.0.0.1), so such a dashboard answers only to loopback host names.
	if h.cfg.open() && !isLoopback(hostOnly(r.Host)) {
		http.Error(w, fmt.Sprintf("dashboard: this dashboard has no credentials, so it answers only to a loopback "+
			"host name (localhost, 127.0.0.1, [::1]), not %q: open it through one, or configure a token", r.Host), http.StatusForbidden)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// securityHeaders keep the pages from being framed, sniffed, or given scripts and styles from
// anywhere but the dashboard itself, and keep job data out of caches and Referer headers.
func securityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
}

// hostOnly returns the host of a Host header, without port or IPv6 brackets.
func hostOnly(host string) string {
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}
