package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// PostgreSQL truncates identifiers longer than this many bytes (NAMEDATALEN-1), which could make
// two tests share a schema: names are built to fit instead.
const maxIdentifierLen = 63

// suffixLen is the length of the random part of names: tests with the same name (the same test in
// two processes, or run twice with -count) must not meet.
const suffixLen = 8

// sanitize lowercases name, replaces every run of characters outside [a-z0-9_] with one
// underscore, trims underscores at both ends and truncates the result to at most max bytes.
// The result needs no quoting as a PostgreSQL identifier or in a Redis MATCH pattern.
func sanitize(name string, max int) string {
	var b strings.Builder
	pendingUnderscore := false
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if pendingUnderscore && b.Len() > 0 {
				b.WriteByte('_')
			}
			pendingUnderscore = false
			b.WriteRune(r)
			continue
		}
		pendingUnderscore = true
	}
	s := b.String()
	if len(s) > max {
		s = strings.TrimRight(s[:max], "_")
	}
	return s
}

// randomSuffix returns suffixLen random lowercase hex digits.
func randomSuffix() string {
	buf := make([]byte, suffixLen/2)
	_, _ = rand.Read(buf) // crypto/rand.Read never fails (it crashes the program instead)
	return hex.EncodeToString(buf)
}

// schemaName builds a schema name for the test called testName: readable in psql while the test
// runs, unique, at most 63 bytes, and never in the pg_ namespace that PostgreSQL reserves.
func schemaName(testName string) string {
	base := sanitize(testName, maxIdentifierLen-1-suffixLen)
	if base == "" || (base[0] >= '0' && base[0] <= '9') || strings.HasPrefix(base, "pg_") {
		base = sanitize("t_"+base, maxIdentifierLen-1-suffixLen)
	}
	return base + "_" + randomSuffix()
}

// redisPrefix builds the key prefix for the test called testName: jptest:<name>:<random>:.
func redisPrefix(testName string) string {
	return "jptest:" + sanitize(testName, 48) + ":" + randomSuffix() + ":"
}
