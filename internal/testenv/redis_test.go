package testenv

import (
	"context"
	"strings"
	"testing"
)

func TestRedisPrefixIsCleanedUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	observer := NewRedis(t)

	var prefix string
	t.Run("use", func(t *testing.T) {
		r := NewRedis(t)
		prefix = r.Prefix
		if !strings.HasPrefix(r.Prefix, "jptest:testredisprefixiscleanedup_use:") {
			t.Errorf("Prefix = %q: want it to name the test", r.Prefix)
		}
		if len(r.Clients) == 0 || len(r.Clients) != len(r.Addrs) {
			t.Fatalf("%d clients for %d addresses", len(r.Clients), len(r.Addrs))
		}
		for _, c := range r.Clients {
			for _, k := range []string{"a", "b", "c:d"} {
				if err := c.Set(ctx, r.Prefix+k, "v", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
	})

	for i, c := range observer.Clients {
		keys, err := c.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 0 {
			t.Errorf("node %s still has %v after the test ended", observer.Addrs[i], keys)
		}
	}
}
