package dispatcher

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobpipe/jobpipe/limits"
	"github.com/jobpipe/jobpipe/uniqueness"
)

// listener wakes the kinds' producers when PostgreSQL notifies new work or changed limits: one
// goroutine (run) with a connection of its own.
type listener struct {
	*shared
	kinds map[string]*kindRunner // read-only
}

// run receives, on a connection of its own, the notifications of new and finished work
// (uniqueness.NotifyChannel) and of changed limits (limits.NotifyChannel), both with the kind as
// payload, and wakes the kind's producer. After a reconnect it wakes every kind and reads its limits
// again, since notifications sent meanwhile were lost. The wait before reconnecting grows while
// connecting fails, and starts over after a connection that worked: a dispatcher that lives through
// many losses (restarts of the server, sessions ended by an operator) reconnects promptly each time.
func (l *listener) run(ctx context.Context) {
	const firstWait = 100 * time.Millisecond
	wait := firstWait
	for ctx.Err() == nil {
		listened, err := l.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			wait = firstWait
		}
		l.logger.Warn("dispatcher: LISTEN connection lost; polling until it is back", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// listenOnce listens on one connection until it fails; listened reports whether it got as far as
// listening.
func (l *listener) listenOnce(ctx context.Context) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg.DB.Config().ConnConfig.Copy())
	if err != nil {
		return false, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, channel := range []string{uniqueness.NotifyChannel, limits.NotifyChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
			return false, err
		}
	}
	for _, k := range l.kinds {
		k.limitsChanged()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		k := l.kinds[n.Payload]
		switch {
		case k == nil:
		case n.Channel == limits.NotifyChannel:
			k.limitsChanged()
		default:
			k.signal()
		}
	}
}
