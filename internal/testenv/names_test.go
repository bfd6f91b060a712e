package testenv

import (
	"regexp"
	"strings"
	"testing"
)

func TestSanitize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		max      int
		want     string
	}{
		{"plain", "TestFoo", 63, "testfoo"},
		{"subtest separators collapse", "TestFoo/sub case#01", 63, "testfoo_sub_case_01"},
		{"runs of symbols become one underscore", "a--__//b", 63, "a_b"},
		{"ends trimmed", "__a b__", 63, "a_b"},
		{"non-ASCII dropped", "TestÜnïcode/日本", 63, "test_n_code"},
		{"truncated", "abcdefghij", 4, "abcd"},
		{"no trailing underscore after truncation", "abc_defg", 4, "abc"},
		{"empty", "///", 63, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := sanitize(tt.in, tt.max); got != tt.want {
				t.Errorf("sanitize(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
			}
		})
	}
}

var plainIdentifier = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func TestSchemaName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, testName, wantPrefix string
	}{
		{"test name kept", "TestEnqueue/unique_key", "testenqueue_unique_key_"},
		{"long name truncated", strings.Repeat("TestVeryLongName", 10), "testverylongname"},
		{"leading digit gets a letter", "1abc", "t_1abc_"},
		{"pg_ namespace avoided", "pg_catalog", "t_pg_catalog_"},
		{"empty name", "", "t_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := schemaName(tt.testName)
			if len(got) > maxIdentifierLen {
				t.Errorf("schemaName(%q) = %q: %d bytes, over %d", tt.testName, got, len(got), maxIdentifierLen)
			}
			if !plainIdentifier.MatchString(got) {
				t.Errorf("schemaName(%q) = %q: not a plain identifier", tt.testName, got)
			}
			if !strings.HasPrefix(got, tt.wantPrefix) {
				t.Errorf("schemaName(%q) = %q: want prefix %q", tt.testName, got, tt.wantPrefix)
			}
			if again := schemaName(tt.testName); again == got {
				t.Errorf("schemaName(%q) gave %q twice: want a random suffix", tt.testName, got)
			}
		})
	}
}

func TestRedisPrefix(t *testing.T) {
	t.Parallel()
	got := redisPrefix("TestLock/Two Nodes")
	if !regexp.MustCompile(`^jptest:testlock_two_nodes:[0-9a-f]{8}:$`).MatchString(got) {
		t.Errorf("redisPrefix = %q: want jptest:testlock_two_nodes:<8 hex>:", got)
	}
	if a, b := redisPrefix("TestLock"), redisPrefix("TestLock"); a == b {
		t.Error("redisPrefix gave the same prefix twice: want a random part")
	}
}
