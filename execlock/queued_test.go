package execlock

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// scriptCounter is a go-redis hook that records the script commands a node was sent, in order,
// alone or in pipelines.
type scriptCounter struct {
	mu   sync.Mutex
	sent []string
}

func (h *scriptCounter) record(cmd redis.Cmder) {
	if n := cmd.Name(); n == "evalsha" || n == "eval" {
		h.mu.Lock()
		h.sent = append(h.sent, n)
		h.mu.Unlock()
	}
}

func (h *scriptCounter) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sent
	h.sent = nil
	return s
}

func (h *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.record(c)
		}
		return next(ctx, cmds)
	}
}

// TestScriptsAfterFlush checks that extend and release send EVALSHA, and the script itself (EVAL)
// only when the node answers NOSCRIPT: on a node's first script call, and after its script cache
// is emptied (a restarted node's is). Each still does its work: the TTL is reset, the key deleted.
// Queued commands (pipelining) and plain ones (redsync's own client adapter) send the same.
func TestScriptsAfterFlush(t *testing.T) {
	t.Parallel()
	for _, pipelining := range []bool{true, false} {
		t.Run("pipelining="+strconv.FormatBool(pipelining), func(t *testing.T) {
			t.Parallel()
			hook := &scriptCounter{}
			b := setup(t, 1, func(c *Config) {
				c.DisablePipelining = !pipelining
				c.Nodes[0].AddHook(hook)
			})
			ctx, node := context.Background(), b.clients[0]
			lk := mustLock(t)(b.locker.TryExec(ctx, "flush", "k", 0))
			step := func(name string, do func() error, want ...string) {
				t.Helper()
				if err := do(); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if got := hook.take(); !slices.Equal(got, want) {
					t.Errorf("%s sent %v, want %v", name, got, want)
				}
			}
			extendResetsTTL := func() error {
				if err := node.PExpire(ctx, lk.Key(), DefaultExecTTL/2).Err(); err != nil {
					return err
				}
				if err := lk.Extend(ctx); err != nil {
					return err
				}
				if ttl := node.PTTL(ctx, lk.Key()).Val(); ttl <= DefaultExecTTL/2 {
					t.Errorf("TTL after Extend: %v, want over %v", ttl, DefaultExecTTL/2)
				}
				return nil
			}
			step("first extend", extendResetsTTL, "evalsha", "eval")
			step("second extend", extendResetsTTL, "evalsha")
			if err := node.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			step("extend after SCRIPT FLUSH", extendResetsTTL, "evalsha", "eval")
			if err := node.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			step("release after SCRIPT FLUSH", func() error { return lk.Release(ctx) }, "evalsha", "eval")
			if n := b.present(t, lk.Key()); n != 0 {
				t.Errorf("key %s on %d node(s) after Release, want 0", lk.Key(), n)
			}
		})
	}
}
