package testenv

import (
	"slices"
	"testing"
	"time"
)

func TestSplitRedisList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in  string
		wantAddrs []string
		wantDBs   []int
	}{
		{"one host:port", "127.0.0.1:6379", []string{"127.0.0.1:6379"}, []int{0}},
		{"URL with database", "redis://h1:7000/3", []string{"h1:7000"}, []int{3}},
		{"several, spaces and empty entries", " a:1 , redis://:pw@b:2/1,, c:3 ", []string{"a:1", "b:2", "c:3"}, []int{0, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nodes, err := splitRedisList(tt.in)
			if err != nil {
				t.Fatalf("splitRedisList(%q): %v", tt.in, err)
			}
			var addrs []string
			var dbs []int
			for _, n := range nodes {
				o, err := redisOptions(n)
				if err != nil {
					t.Fatalf("redisOptions(%q): %v", n, err)
				}
				addrs, dbs = append(addrs, o.Addr), append(dbs, o.DB)
			}
			if !slices.Equal(addrs, tt.wantAddrs) || !slices.Equal(dbs, tt.wantDBs) {
				t.Errorf("splitRedisList(%q): addrs %v dbs %v, want %v %v", tt.in, addrs, dbs, tt.wantAddrs, tt.wantDBs)
			}
		})
	}
}

func TestSplitRedisListErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", " , ", "localhost", "h:port", ":6379", "h:0", "http://h:1", "redis://h:1/notadb"} {
		if nodes, err := splitRedisList(in); err == nil {
			t.Errorf("splitRedisList(%q) = %v, want an error", in, nodes)
		}
	}
}

func TestRedisOptionsTimeouts(t *testing.T) {
	t.Parallel()
	for _, node := range []string{"h:1", "redis://h:1/0"} {
		o, err := redisOptions(node)
		if err != nil {
			t.Fatal(err)
		}
		if !o.ContextTimeoutEnabled || o.DialTimeout != time.Second || o.ReadTimeout != time.Second || o.WriteTimeout != time.Second {
			t.Errorf("redisOptions(%q): ContextTimeoutEnabled %v, timeouts %v/%v/%v; want true and 1s each",
				node, o.ContextTimeoutEnabled, o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
		}
	}
}
