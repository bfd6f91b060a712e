package execlock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestScriptsAfterFlush empties the node's script cache (a restarted node's is empty) between
// calls: extend and release still do their work, the TTL reset and the key deleted.
func TestScriptsAfterFlush(t *testing.T) {
	t.Parallel()
	b := setup(t, 1, nil)
	ctx, node := context.Background(), b.clients[0]
	lk := mustLock(t)(b.locker.TryExec(ctx, "flush", "k", 0))
	extendResetsTTL := func(name string) {
		t.Helper()
		if err := node.PExpire(ctx, lk.Key(), DefaultExecTTL/2).Err(); err != nil {
			t.Fatal(err)
		}
		if err := lk.Extend(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ttl := node.PTTL(ctx, lk.Key()).Val(); ttl <= DefaultExecTTL/2 {
			t.Errorf("%s: TTL %v, want over %v", name, ttl, DefaultExecTTL/2)
		}
	}
	flush := func() {
		t.Helper()
		if err := node.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	extendResetsTTL("first extend")
	flush()
	extendResetsTTL("extend after SCRIPT FLUSH")
	flush()
	if err := lk.Release(ctx); err != nil {
		t.Fatalf("release after SCRIPT FLUSH: %v", err)
	}
	if n := b.present(t, lk.Key()); n != 0 {
		t.Errorf("key %s on %d node(s) after Release, want 0", lk.Key(), n)
	}
}

// ownDeletes is a go-redis hook that records the answers to the Locker's own compare-and-delete
// (deleteScript), by key.
type ownDeletes struct {
	mu      sync.Mutex
	answers map[string][]any
}

func (h *ownDeletes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *ownDeletes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *ownDeletes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if a := c.Args(); len(a) >= 5 && a[0] == "eval" && a[1] == deleteScript && c.Err() == nil {
				h.mu.Lock()
				key, _ := a[3].(string)
				h.answers[key] = append(h.answers[key], c.(*redis.Cmd).Val())
				h.mu.Unlock()
			}
		}
		return err
	}
}

func (h *ownDeletes) of(key string) []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.answers[key]
}

// TestFailedAcquireCleanedByOwnScript stalls the only node while an attempt is made: its SET NX
// waits in the node's socket, the attempt fails at CallTimeout, and redsync's clean-up round has
// no time left to send anything. When the node resumes it runs the SET NX, creating a lock that
// nobody holds; the Locker's own compare-and-delete, retried until the node answers, removes it.
func TestFailedAcquireCleanedByOwnScript(t *testing.T) {
	t.Parallel()
	hook := &ownDeletes{answers: map[string][]any{}}
	b := setup(t, 1, func(c *Config) { c.Nodes[0].AddHook(hook) })
	l, ctx, node := b.locker, context.Background(), b.nodes[0]
	// A connection to the node, idle in the client's pool, on which the SET NX will be written.
	if err := b.clients[0].Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	node.Pause()
	t.Cleanup(node.Resume)
	_, err := l.TryExec(ctx, "late", "k", 0)
	wantErr(t, "TryExec on the stalled node", err, ErrUnavailable)
	key := "jobpipe:lock:x:late:k:0"
	time.Sleep(200 * time.Millisecond)
	node.Resume()
	resumed := time.Now()

	deleted := func() bool {
		for _, a := range hook.of(key) {
			if a == int64(1) {
				return true
			}
		}
		return false
	}
	for !deleted() || b.present(t, key) != 0 {
		if time.Since(resumed) > 3*time.Second {
			t.Fatalf("3s after SIGCONT: key %s on %d node(s), the Locker's compare-and-delete answered %v; "+
				"want the late SET NX's key removed by it (an answer of 1)", key, b.present(t, key), hook.of(key))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := l.janitor.pendingCount(); n > 1 {
		t.Errorf("%d deletes pending after the key was removed, want at most its confirmation", n)
	}
	t.Logf("the late SET NX was removed by the Locker's own delete %v after SIGCONT (answers %v)",
		time.Since(resumed).Round(time.Millisecond), hook.of(key))
}
