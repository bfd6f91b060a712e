package execlock

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// callContext bounds a lock call by CallTimeout and marks its commands for carryHook.
func (l *Locker) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithValue(ctx, carryKey{}, carryOn), l.cfg.CallTimeout)
}

// carryKey marks the context of a lock call's commands: carryOn until carryHook has detached it.
type carryKey struct{}

const (
	carryOn = iota + 1
	carried
)

// carryHook runs each command of a lock call to its deadline, even when the call's context is
// cancelled first. redsync's fail-fast rounds return once a quorum has answered, and an acquire
// then cancels its round's context; go-redis does not send a command whose context is cancelled
// before it got a connection, so the nodes the quorum did not need would miss the SET NX, the
// extension or the delete, leaving locks on a bare quorum or values behind. The deadline still
// bounds every command.
type carryHook struct{}

// DialHook changes nothing.
func (carryHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook changes nothing: the Locker sends no pipeline of a lock call.
func (carryHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook detaches a lock call's command from its call's cancellation, keeping its deadline.
func (carryHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		deadline, ok := ctx.Deadline()
		if !ok || ctx.Value(carryKey{}) != carryOn {
			return next(ctx, cmd)
		}
		// Marked carried, so that the hook a second Locker added to the same client lets it be.
		detached, cancel := context.WithDeadline(context.WithValue(context.WithoutCancel(ctx), carryKey{}, carried), deadline)
		defer cancel()
		return next(detached, cmd)
	}
}
