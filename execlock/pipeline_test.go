package execlock

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// commandCounter is a go-redis hook that counts SET commands sent alone and in pipelines.
type commandCounter struct {
	alone, pipelined, pipelines atomic.Int64
}

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "set" {
			h.alone.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		sets := 0
		for _, c := range cmds {
			if c.Name() == "set" {
				sets++
			}
		}
		if sets > 0 {
			h.pipelines.Add(1)
			h.pipelined.Add(int64(sets))
		}
		return next(ctx, cmds)
	}
}

// TestConcurrentCallsShareRoundTrips holds the only node's answers back while 32 acquisitions are
// made at once: the first is on the wire; the other 31 queue behind it and, once the node answers,
// leave in one pipeline. Without pipelining each is a command of its own.
func TestConcurrentCallsShareRoundTrips(t *testing.T) {
	for _, pipelining := range []bool{true, false} {
		t.Run("pipelining="+strconv.FormatBool(pipelining), func(t *testing.T) {
			hook := &commandCounter{}
			b := setup(t, 1, func(c *Config) {
				c.DisablePipelining = !pipelining
				c.Nodes[0].AddHook(hook)
			})
			ctx := context.Background()
			const calls = 32
			locks := make([]*Lock, calls)
			errs := make([]error, calls)
			var wg sync.WaitGroup
			acquire := func(i int) {
				wg.Go(func() { locks[i], errs[i] = b.locker.TryQueue(ctx, "pipe", strconv.Itoa(i), 0) })
			}
			b.nodes[0].Pause()
			acquire(0)
			time.Sleep(50 * time.Millisecond) // the first command is on the wire
			for i := 1; i < calls; i++ {
				acquire(i)
			}
			time.Sleep(150 * time.Millisecond) // the others wait behind it
			b.nodes[0].Resume()
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if got := b.holders(t, locks[i].Key(), locks[i].Value()); got != 1 {
					t.Fatalf("lock %d on %d nodes, want 1", i, got)
				}
				if err := locks[i].Release(ctx); err != nil {
					t.Fatalf("release %d: %v", i, err)
				}
			}
			alone, pipelined, pipelines := hook.alone.Load(), hook.pipelined.Load(), hook.pipelines.Load()
			t.Logf("SET NX: %d alone, %d in %d pipelines", alone, pipelined, pipelines)
			if !pipelining {
				if alone != calls || pipelines != 0 {
					t.Fatalf("without pipelining: %d SET NX alone and %d pipelines, want %d and 0", alone, pipelines, calls)
				}
				return
			}
			// The first command (a lone command goes out as it is), then the 31 behind it
			// together; at most one straggler reached the pipeliner after the node answered.
			if alone+pipelined != calls || alone > 2 || pipelines < 1 || pipelines > 2 {
				t.Fatalf("with pipelining: %d SET NX alone, %d in %d pipelines; want the first alone "+
					"and the other %d in one pipeline (one straggler allowed)", alone, pipelined, pipelines, calls-1)
			}
		})
	}
}
