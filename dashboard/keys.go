package dashboard

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
)

// keys are the MAC keys of the dashboard's cookies and forms.
//
// They are derived from the credentials, so that sessions survive a restart and are shared by every
// replica configured alike, and so that changing the token or password ends every session at once.
// With no credentials they are random: nothing outlives the process.
type keys struct {
	session []byte // session cookies
	csrf    []byte // synchronizer tokens in forms
	flash   []byte // flash-message cookies
}

func newKeys(c Config) (keys, error) {
	secret := make([]byte, 32)
	if c.hasCredentials() {
		// Length-prefixed, so that no two different credential sets give the same secret.
		secret = secret[:0]
		for _, s := range []string{c.Token, c.BasicAuthUser, c.BasicAuthPassword} {
			secret = binary.BigEndian.AppendUint32(secret, uint32(len(s)))
			secret = append(secret, s...)
		}
	} else if _, err := rand.Read(secret); err != nil {
		return keys{}, fmt.Errorf("dashboard: reading random bytes for the session key: %w", err)
	}
	derive := func(purpose string) ([]byte, error) {
		return hkdf.Key(sha256.New, secret, []byte("jobpipe dashboard v1"), purpose, 32)
	}
	var k keys
	var err error
	if k.session, err = derive("session"); err != nil {
		return keys{}, fmt.Errorf("dashboard: deriving the session key: %w", err)
	}
	if k.csrf, err = derive("csrf"); err != nil {
		return keys{}, fmt.Errorf("dashboard: deriving the CSRF key: %w", err)
	}
	if k.flash, err = derive("flash"); err != nil {
		return keys{}, fmt.Errorf("dashboard: deriving the flash key: %w", err)
	}
	return k, nil
}

// mac returns HMAC-SHA256 of the parts under key, each part length-prefixed.
func mac(key []byte, parts ...[]byte) []byte {
	h := hmac.New(sha256.New, key)
	for _, p := range parts {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return h.Sum(nil)
}

// secretEqual compares a secret given by a client with the configured one in constant time: both
// are hashed first, so that neither the content nor the length leaks through timing.
func secretEqual(given, want string) bool {
	g, w := sha256.Sum256([]byte(given)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
