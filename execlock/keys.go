package execlock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// lockType tells a queue lock from an execution lock; its value is the key's type segment.
type lockType string

const (
	queueLock lockType = "q:"
	execLock  lockType = "x:"
)

// hashedKeyPrefix marks a key value replaced by its SHA-256. A key value that itself starts with it
// is hashed too, so that no literal key value can name the lock of a hashed one.
const hashedKeyPrefix = "sha256:"

// keyBase returns the lock key of (typ, kind, key) up to its slot number. The kind ends at the
// first ':' after the type, so it cannot contain one; the key value may contain any byte, since it
// ends at the last ':' (the slot is a number).
func keyBase(prefix string, typ lockType, kind, key string) (string, error) {
	switch {
	case kind == "":
		return "", fmt.Errorf("%w kind: empty", ErrInvalid)
	case len(kind) > MaxNameLen:
		return "", fmt.Errorf("%w kind: %d bytes, at most %d", ErrInvalid, len(kind), MaxNameLen)
	case strings.ContainsRune(kind, ':'):
		return "", fmt.Errorf("%w kind %q: contains ':', the lock key separator", ErrInvalid, kind)
	}
	return prefix + string(typ) + kind + ":" + keyPart(key) + ":", nil
}

// lockKey returns the full lock key of one slot.
func lockKey(prefix string, typ lockType, kind, key string, slot int) (string, error) {
	if slot < 0 || slot >= MaxLimit {
		return "", fmt.Errorf("%w slot %d: want 0 to %d", ErrInvalid, slot, MaxLimit-1)
	}
	base, err := keyBase(prefix, typ, kind, key)
	if err != nil {
		return "", err
	}
	return base + strconv.Itoa(slot), nil
}

// keyPart returns the key value as it appears in a lock key: the value itself when it is at most
// MaxKeyLen bytes and does not start with "sha256:", otherwise "sha256:" and its SHA-256 in hex
// (71 bytes). No literal value starts with the hashed prefix, so the mapping is injective (up to
// SHA-256 collisions).
func keyPart(key string) string {
	if len(key) <= MaxKeyLen && !strings.HasPrefix(key, hashedKeyPrefix) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return hashedKeyPrefix + hex.EncodeToString(sum[:])
}
