package dashboard

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"net/http"
)

// csrfField is the form field that carries the synchronizer token.
const csrfField = "csrf_token"

// Two defences against cross-site request forgery, both on every POST:
//
//   - http.CrossOriginProtection refuses a request the browser marks as cross-site (Sec-Fetch-Site)
//     or whose Origin is not the dashboard's own;
//   - a synchronizer token: every form carries an HMAC of the session (or of the basic-auth user),
//     which a page of another origin cannot read, and the POST must bring it back.
//
// A request authenticated with a bearer token needs no synchronizer token: a browser never adds an
// Authorization: Bearer header by itself, so such a request cannot be forged from another site.

var (
	errCSRFMissing = errors.New("the form has no CSRF token: reload the page and submit the form again")
	errCSRFWrong   = errors.New("the form's CSRF token does not match this session (it may come from an older session or another site): reload the page and submit the form again")
	errNoSession   = errors.New("the request carries no session cookie, so its CSRF token cannot be checked: enable cookies for this site, reload the page and submit the form again")
)

// csrfToken returns the token forms carry for id, or "" when it needs none.
func (h *Handler) csrfToken(id identity) string {
	if id.csrfID == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(mac(h.keys.csrf, []byte(id.csrfID)))
}

// checkCSRF checks the synchronizer token of a POST whose form is parsed.
func (h *Handler) checkCSRF(r *http.Request, id identity) error {
	if id.via == "token" {
		return nil
	}
	if id.csrfID == "" {
		return errNoSession
	}
	given := r.PostFormValue(csrfField)
	if given == "" {
		return errCSRFMissing
	}
	if !hmac.Equal([]byte(given), []byte(h.csrfToken(id))) {
		return errCSRFWrong
	}
	return nil
}
