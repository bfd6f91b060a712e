package dashboard

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageNames are the pages, each a template file rendered inside templates/layout.html.
var pageNames = []string{"overview", "kind", "job", "login", "error"}

func parseTemplates() (map[string]*template.Template, error) {
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(templateFuncs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: parsing template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// static serves the embedded CSS and JavaScript. They change with the binary only, so browsers may
// keep them for a while; no-cache makes them revalidate, which is cheap.
func (h *Handler) static() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err) // the directory is embedded: it exists
	}
	files := http.StripPrefix("/static/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// view is what every page's template gets besides its own data.
type view struct {
	// Title is the page's title.
	Title string
	// Base is the path the dashboard is mounted under, for links.
	Base string
	// CSRF is the token every form carries.
	CSRF string
	// CanWrite shows the forms that change things.
	CanWrite bool
	// ReadOnly marks the dashboard read-only.
	ReadOnly bool
	// LoggedIn offers to log out; ShowLogin offers to log in.
	LoggedIn, ShowLogin bool
	// Flash is the outcome of the previous POST.
	Flash *flash
}

func (h *Handler) view(id identity, title string, f *flash) view {
	return view{
		Title:     title,
		Base:      h.base,
		CSRF:      h.csrfToken(id),
		CanWrite:  !h.cfg.ReadOnly && id.authenticated,
		ReadOnly:  h.cfg.ReadOnly,
		LoggedIn:  id.via == "session",
		ShowLogin: h.cfg.hasCredentials() && !id.authenticated,
		Flash:     f,
	}
}

// render executes page name into a buffer first, so that a failing template gives a clean 500
// rather than half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, id identity, status int, name string, data any) {
	var b bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&b, "layout", data); err != nil {
		h.log.Error("dashboard: rendering a page", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "dashboard: the page could not be rendered; the server's log has the error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// errorView is the error page's data.
type errorView struct {
	view
	Status  int
	Message string
}

// fail answers with an error page (or a JSON error under /api/) saying what was wrong.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, id identity, status int, msg string) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeJSONError(w, status, msg)
		return
	}
	h.render(w, r, id, status, "error", errorView{
		view:    h.view(id, http.StatusText(status), nil),
		Status:  status,
		Message: msg,
	})
}

// internal answers 500 for an error that is not the client's, and logs it: its text may describe
// the database, which is not for every visitor to read.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, id identity, err error) {
	h.log.Error("dashboard: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	h.fail(w, r, id, http.StatusInternalServerError, "Something went wrong on the server; its log has the details.")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":"encoding the response failed"}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
