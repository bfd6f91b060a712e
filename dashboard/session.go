package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"time"
)

// sessionCookie is the cookie that carries a browser's session.
const sessionCookie = "jobpipe_dashboard_session"

// session is what a session cookie carries. It is stateless: the cookie holds it with a MAC, and
// nothing is stored on the server, so a session ends when it expires or the credentials change.
type session struct {
	// id is random. It identifies the session's CSRF token, and a login gives a new one, so that a
	// session planted before the login is worth nothing after it.
	id [16]byte
	// expires is when the cookie stops being accepted.
	expires time.Time
	// auth is whether the session logged in. Every visitor gets a session (its CSRF token protects
	// the login form); only a logged-in one may change things.
	auth bool
}

const (
	sessionVersion = 1
	payloadLen     = 1 + 1 + 8 + 16 // version, flags, expiry (Unix seconds), id
	macLen         = 32
)

func newSession(auth bool, ttl time.Duration) (session, error) {
	s := session{expires: time.Now().Add(ttl), auth: auth}
	_, err := rand.Read(s.id[:])
	return s, err
}

// csrfID is what the session's CSRF token is computed from.
func (s session) csrfID() string { return "session:" + hex.EncodeToString(s.id[:]) }

func (s session) encode(k keys) string {
	p := make([]byte, 0, payloadLen+macLen)
	p = append(p, sessionVersion, 0)
	if s.auth {
		p[1] = 1
	}
	p = binary.BigEndian.AppendUint64(p, uint64(s.expires.Unix()))
	p = append(p, s.id[:]...)
	p = append(p, mac(k.session, p)...)
	return base64.RawURLEncoding.EncodeToString(p)
}

// decodeSession returns the session a cookie value carries, or false when the value was not made
// by this dashboard with its current credentials, or has expired.
func decodeSession(k keys, value string, now time.Time) (session, bool) {
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) != payloadLen+macLen || b[0] != sessionVersion || b[1] > 1 {
		return session{}, false
	}
	if !hmac.Equal(b[payloadLen:], mac(k.session, b[:payloadLen])) {
		return session{}, false
	}
	s := session{auth: b[1] == 1, expires: time.Unix(int64(binary.BigEndian.Uint64(b[2:10])), 0)}
	copy(s.id[:], b[10:payloadLen])
	if !now.Before(s.expires) {
		return session{}, false
	}
	return s, true
}

// readSession returns the request's valid session, if any.
func (h *Handler) readSession(r *http.Request) (session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	return decodeSession(h.keys, c.Value, time.Now())
}

// setSession sends the session's cookie: HttpOnly, so that scripts never see it, and
// SameSite=Strict, so that no other site's page can make the browser send it.
func (h *Handler) setSession(w http.ResponseWriter, r *http.Request, s session) {
	http.SetCookie(w, h.cookie(r, sessionCookie, s.encode(h.keys), s.expires))
}

// cookie returns a cookie of the dashboard's, scoped to its path.
func (h *Handler) cookie(r *http.Request, name, value string, expires time.Time) *http.Cookie {
	c := &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     h.base + "/",
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   r.TLS != nil || h.cfg.SecureCookies,
	}
	if expires.IsZero() {
		c.MaxAge = -1 // delete
	} else {
		c.Expires = expires
		c.MaxAge = max(1, int(time.Until(expires).Seconds()))
	}
	return c
}
