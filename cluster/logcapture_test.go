package cluster

import (
	"context"
	"log/slog"
	"sync"
)

// logRecord is one captured log line: its level, message and attributes
// (those of With included) as text.
type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// logCapture is a slog handler that keeps every record at min or above,
// for tests that check what was logged. Handlers made by WithAttrs share
// the records.
type logCapture struct {
	min   slog.Level
	attrs []slog.Attr
	store *captureStore
}

type captureStore struct {
	mu   sync.Mutex
	recs []logRecord
}

func newLogCapture(min slog.Level) *logCapture {
	return &logCapture{min: min, store: &captureStore{}}
}

func (c *logCapture) Enabled(_ context.Context, l slog.Level) bool { return l >= c.min }

func (c *logCapture) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logCapture{min: c.min, attrs: append(append([]slog.Attr{}, c.attrs...), attrs...), store: c.store}
}

func (c *logCapture) WithGroup(string) slog.Handler { return c }

func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	add := func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.Resolve().String()
		return true
	}
	for _, a := range c.attrs {
		add(a)
	}
	r.Attrs(add)
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, rec)
	return nil
}

// all returns the records so far.
func (c *logCapture) all() []logRecord {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]logRecord(nil), s.recs...)
}

// count returns how many records match.
func (c *logCapture) count(match func(logRecord) bool) int {
	n := 0
	for _, r := range c.all() {
		if match(r) {
			n++
		}
	}
	return n
}
