package execlock

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

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

// pipelineSizes is a go-redis hook that records the size of each pipeline a node was sent.
type pipelineSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (h *pipelineSizes) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *pipelineSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *pipelineSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.sizes = append(h.sizes, len(cmds))
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// TestPipelinerSplitsLongQueues holds the node's answers back while 600 commands queue behind a
// first one on the wire: they leave in pipelines of at most maxPipeline, in the order queued, and
// every command gets its own answer.
func TestPipelinerSplitsLongQueues(t *testing.T) {
	t.Parallel()
	hook := &pipelineSizes{}
	b := setup(t, 1, func(c *Config) { c.Nodes[0].AddHook(hook) })
	p := newPipeliner(b.clients[0], b.locker.workers)
	ctx := context.Background()
	set := func(i int) *queuedCmd {
		q := &queuedCmd{pipe: p, cmd: redis.NewBoolCmd(ctx, "set", "split:"+strconv.Itoa(i), "v", "px", 60000, "nx")}
		q.send()
		return q
	}
	b.nodes[0].Pause()
	first := set(0)
	time.Sleep(50 * time.Millisecond) // the first pipeline is on the wire
	const queued = 600
	cmds := make([]*queuedCmd, queued)
	for i := range cmds {
		cmds[i] = set(i + 1)
	}
	time.Sleep(100 * time.Millisecond)
	b.nodes[0].Resume()
	for i, q := range append([]*queuedCmd{first}, cmds...) {
		if err, _ := q.wait(ctx); err != nil || !q.cmd.(*redis.BoolCmd).Val() {
			t.Fatalf("command %d: %v, set %v; want set", i, err, q.cmd.(*redis.BoolCmd).Val())
		}
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	if want := []int{1, maxPipeline, maxPipeline, queued - 2*maxPipeline}; !slices.Equal(hook.sizes, want) {
		t.Fatalf("pipelines of %v, want %v", hook.sizes, want)
	}
}
