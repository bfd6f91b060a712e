package dispatcher_test

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
)

// logRecorder is a slog.Handler that keeps every record, to check what the dispatcher logs.
type logRecorder struct {
	mu      sync.Mutex
	records []logRecord
}

type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (l *logRecorder) logger() *slog.Logger { return slog.New(l) }

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, rec)
	return nil
}

func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// at returns the records logged at level or above.
func (l *logRecorder) at(level slog.Level) []logRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logRecord
	for _, r := range l.records {
		if r.level >= level {
			out = append(out, r)
		}
	}
	return out
}

// find returns the attributes of each record at level, as text, with "msg" its message, whose
// message starts with prefix.
func (l *logRecorder) find(level slog.Level, prefix string) []map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]string
	for _, r := range l.records {
		if r.level != level || !strings.HasPrefix(r.msg, prefix) {
			continue
		}
		attrs := map[string]string{"msg": r.msg}
		maps.Copy(attrs, r.attrs)
		out = append(out, attrs)
	}
	return out
}
