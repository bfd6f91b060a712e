package dashboard

import (
	"errors"
	"net/http"
	"net/url"
)

// maxFormBytes bounds a POST body: the largest form is a list of job ids.
const maxFormBytes = 64 << 10

// request is a request with what the wrappers found out about it.
type request struct {
	*http.Request
	id    identity
	flash *flash
}

type handlerFunc func(w http.ResponseWriter, r *request)

// page wraps the handler of an HTML page: it gives every visitor a session (whose CSRF token the
// page's forms carry), enforces RequireAuthForReads, and takes the flash message left by the
// previous POST.
func (h *Handler) page(next handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, hr *http.Request) {
		id := h.identify(hr)
		if id.badCredentials {
			w.Header().Set("WWW-Authenticate", h.challenge())
			h.fail(w, hr, id, http.StatusUnauthorized, "The Authorization header's credentials are wrong.")
			return
		}
		if !id.hasSession && id.csrfID == "" && id.via != "token" {
			s, err := newSession(false, h.cfg.SessionTTL)
			if err != nil {
				h.internal(w, hr, id, err)
				return
			}
			h.setSession(w, hr, s)
			id.session, id.hasSession, id.csrfID = s, true, s.csrfID()
		}
		if h.cfg.RequireAuthForReads && !id.authenticated && hr.URL.Path != "/login" {
			http.Redirect(w, hr, h.base+"/login?next="+url.QueryEscape(h.base+hr.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next(w, &request{Request: hr, id: id, flash: h.takeFlash(w, hr)})
	}
}

// api wraps a JSON endpoint: reading only, with the same read rule as pages.
func (h *Handler) api(next handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, hr *http.Request) {
		id := h.identify(hr)
		if id.badCredentials || (h.cfg.RequireAuthForReads && !id.authenticated) {
			w.Header().Set("WWW-Authenticate", h.challenge())
			writeJSONError(w, http.StatusUnauthorized, "authentication required: send a bearer token or basic auth, or log in")
			return
		}
		next(w, &request{Request: hr, id: id})
	}
}

// post wraps a POST that needs no authentication (login, logout): the cross-origin check, a
// bounded body, and the CSRF token.
func (h *Handler) post(next handlerFunc) http.HandlerFunc {
	return h.checkPost(next, false)
}

// action wraps a POST that changes jobs or limits: post's checks, after refusing it when the
// dashboard is read-only or the request is not authenticated.
func (h *Handler) action(next handlerFunc) http.HandlerFunc {
	return h.checkPost(next, true)
}

func (h *Handler) checkPost(next handlerFunc, changes bool) http.HandlerFunc {
	return func(w http.ResponseWriter, hr *http.Request) {
		id := h.identify(hr)
		if err := h.cop.Check(hr); err != nil {
			h.fail(w, hr, id, http.StatusForbidden, "Refused a cross-origin request: "+err.Error()+
				". Submit the form from the dashboard's own pages.")
			return
		}
		if changes && h.cfg.ReadOnly {
			h.fail(w, hr, id, http.StatusForbidden, "This dashboard is read-only: it changes nothing.")
			return
		}
		if id.badCredentials || (changes && !id.authenticated) {
			w.Header().Set("WWW-Authenticate", h.challenge())
			msg := "Changing jobs and limits needs authentication: log in with the dashboard's token, or send it as a bearer token."
			if id.badCredentials {
				msg = "The Authorization header's credentials are wrong."
			}
			h.fail(w, hr, id, http.StatusUnauthorized, msg)
			return
		}
		hr.Body = http.MaxBytesReader(w, hr.Body, maxFormBytes)
		if err := hr.ParseForm(); err != nil {
			status := http.StatusBadRequest
			if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
				status = http.StatusRequestEntityTooLarge
			}
			h.fail(w, hr, id, status, "The form could not be read: "+err.Error())
			return
		}
		if err := h.checkCSRF(hr, id); err != nil {
			h.fail(w, hr, id, http.StatusForbidden, "Refused: "+err.Error())
			return
		}
		next(w, &request{Request: hr, id: id})
	}
}
