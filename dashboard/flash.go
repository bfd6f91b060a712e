package dashboard

import (
	"crypto/hmac"
	"encoding/base64"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// flashCookie carries the outcome of a POST to the page it redirects to (redirect-after-POST, so
// that reloading the page does not repeat the change).
const flashCookie = "jobpipe_dashboard_flash"

// maxFlash bounds a flash message, so that its cookie stays well under the 4 KB browsers keep.
const maxFlash = 1500

// flash is a message shown once, on the next page.
type flash struct {
	// Error: the message reports a failure.
	Error bool
	// Message is the text.
	Message string
}

// setFlash leaves f for the next page. The cookie is signed: no other page can plant a message.
func (h *Handler) setFlash(w http.ResponseWriter, r *http.Request, f flash) {
	msg := f.Message
	if len(msg) > maxFlash {
		cut := maxFlash
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + " …"
	}
	kind := "i"
	if f.Error {
		kind = "e"
	}
	payload := kind + msg
	value := base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." +
		base64.RawURLEncoding.EncodeToString(mac(h.keys.flash, []byte(payload)))
	http.SetCookie(w, h.cookie(r, flashCookie, value, time.Now().Add(time.Minute)))
}

// takeFlash returns the message left for this page, if any, and deletes it.
func (h *Handler) takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	http.SetCookie(w, h.cookie(r, flashCookie, "", time.Time{}))
	enc, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return nil
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(enc)
	given, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || len(payload) == 0 || !hmac.Equal(given, mac(h.keys.flash, payload)) {
		return nil
	}
	return &flash{Error: payload[0] == 'e', Message: string(payload[1:])}
}
