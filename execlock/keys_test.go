package execlock

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestLockKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("k", MaxKeyLen+1)
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return "sha256:" + hex.EncodeToString(h[:]) }
	tests := []struct {
		name    string
		typ     lockType
		kind    string
		key     string
		slot    int
		want    string
		wantErr string
	}{
		{name: "exec", typ: execLock, kind: "email", key: "user-42", slot: 0, want: "p:x:email:user-42:0"},
		{name: "queue", typ: queueLock, kind: "email", key: "user-42", slot: 7, want: "p:q:email:user-42:7"},
		{name: "empty key", typ: execLock, kind: "email", key: "", slot: 1, want: "p:x:email::1"},
		{name: "key with separators and bytes", typ: execLock, kind: "k", key: "a:b\x00\n:c", slot: 2, want: "p:x:k:a:b\x00\n:c:2"},
		{name: "key at the limit kept", typ: execLock, kind: "k", key: long[:MaxKeyLen], slot: 0, want: "p:x:k:" + long[:MaxKeyLen] + ":0"},
		{name: "long key hashed", typ: execLock, kind: "k", key: long, slot: 0, want: "p:x:k:" + sum(long) + ":0"},
		{name: "key that looks hashed is hashed", typ: execLock, kind: "k", key: "sha256:abc", slot: 0, want: "p:x:k:" + sum("sha256:abc") + ":0"},
		{name: "last slot", typ: execLock, kind: "k", key: "v", slot: MaxLimit - 1, want: "p:x:k:v:" + strconv.Itoa(MaxLimit-1)},
		{name: "empty kind", typ: execLock, kind: "", key: "v", wantErr: "kind: empty"},
		{name: "kind with colon", typ: execLock, kind: "a:b", key: "v", wantErr: "contains ':'"},
		{name: "long kind", typ: execLock, kind: strings.Repeat("k", MaxNameLen+1), key: "v", wantErr: "kind: 129 bytes"},
		{name: "negative slot", typ: execLock, kind: "k", key: "v", slot: -1, wantErr: "slot -1"},
		{name: "slot too large", typ: execLock, kind: "k", key: "v", slot: MaxLimit, wantErr: "slot 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := lockKey("p:", tt.typ, tt.kind, tt.key, tt.slot)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("lockKey = %q, %v; want ErrInvalid containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("lockKey = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// FuzzLockKey checks that lock keys are bounded and injective: two different (kind, key, slot)
// never share a key, and every key parses back to its parts.
func FuzzLockKey(f *testing.F) {
	f.Add("email", "user-42", 0, "email", "user-4", 2)
	f.Add("a", "b:c", 1, "a:b", "c", 1)
	f.Add("k", strings.Repeat("x", 200), 3, "k", "sha256:", 3)
	f.Fuzz(func(t *testing.T, kind1, key1 string, slot1 int, kind2, key2 string, slot2 int) {
		k1, err1 := lockKey("pre:", execLock, kind1, key1, slot1)
		k2, err2 := lockKey("pre:", execLock, kind2, key2, slot2)
		if err1 != nil || err2 != nil {
			return
		}
		if len(k1) > len("pre:x:")+MaxNameLen+1+max(MaxKeyLen, 71)+1+4 {
			t.Fatalf("key of %d bytes: %q", len(k1), k1)
		}
		same := kind1 == kind2 && key1 == key2 && slot1 == slot2
		if (k1 == k2) != same {
			t.Fatalf("(%q, %q, %d) -> %q and (%q, %q, %d) -> %q", kind1, key1, slot1, k1, kind2, key2, slot2, k2)
		}
		rest := strings.TrimPrefix(k1, "pre:x:")
		kind, rest, _ := strings.Cut(rest, ":")
		i := strings.LastIndexByte(rest, ':')
		if kind != kind1 || rest[:i] != keyPart(key1) || rest[i+1:] != strconv.Itoa(slot1) {
			t.Fatalf("%q does not parse back to (%q, %q, %d)", k1, kind1, key1, slot1)
		}
	})
}
