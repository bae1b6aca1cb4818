package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// hclogAdapter lets hashicorp/raft log through log/slog, so the whole node
// has one log stream with one format and level. Every copy of one node's
// adapter (With, Named) shares st, which judges raft's lines in context
// (raftlogs.go).
type hclogAdapter struct {
	l    *slog.Logger
	name string
	args []any
	st   *raftLogState
}

// newHCLog returns the adapter raft logs through; st may be nil (a fresh
// state: no planned transfer).
func newHCLog(l *slog.Logger, st *raftLogState) hclog.Logger {
	if st == nil {
		st = &raftLogState{}
	}
	return &hclogAdapter{l: l, st: st}
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level >= hclog.Warn && (peerFailureMessages[msg] || shuttingDown(args)) {
		level = hclog.Debug
	}
	level, sum := a.st.judge(level, msg, args)
	if sum != nil && a.enabled(sum.level) {
		a.emit(sum.level, sum.msg, sum.args)
	}
	if !a.enabled(level) {
		return
	}
	a.emit(level, msg, args)
}

// emit writes one line: the adapter's name and implied arguments, then
// args, each value rendered as text (logValue).
func (a *hclogAdapter) emit(level hclog.Level, msg string, args []any) {
	l := a.l
	if a.name != "" {
		l = l.With("logger", a.name)
	}
	all := append(append([]any{}, a.args...), args...)
	for i, v := range all {
		if i%2 == 1 || i == len(all)-1 {
			all[i] = logValue(v)
		}
	}
	l.Log(context.Background(), slogLevel(level), msg, all...)
}

// peerFailureMessages are hashicorp/raft's messages for one failed RPC to
// a peer. While a peer is down raft logs them at ERROR several times a
// second (and "failed to contact" at WARN); peerHealth turns the same
// failures into one WARN per outage, so these go to DEBUG.
var peerFailureMessages = map[string]bool{
	"failed to heartbeat to":                  true,
	"failed to appendEntries to":              true,
	"failed to pipeline appendEntries":        true,
	"failed to start pipeline replication to": true,
	"failed to make requestVote RPC":          true,
	"failed to contact":                       true,
}

// shuttingDown reports whether a line's error is this node's transport
// closing (raft logs a connection it was serving as "failed to decode
// incoming command" then), or a connection this node cut itself (the
// stream layer's drain, on the way out): part of every shutdown, no error.
func shuttingDown(args []any) bool {
	for i := 1; i < len(args); i += 2 {
		if err, ok := args[i].(error); ok && (errors.Is(err, raft.ErrTransportShutdown) || errors.Is(err, net.ErrClosed)) {
			return true
		}
	}
	return false
}

// logValue renders one of raft's log values as its text, so every handler
// shows what the text handler shows: slog's JSON handler marshals a value
// that is no error with encoding/json, which gives "{}" for a *raft.Raft
// and a number for a time.Duration or a raft.ServerSuffrage.
func logValue(v any) any {
	switch v := v.(type) {
	case nil, string, bool, int, int64, uint64, float64, time.Time, slog.LogValuer, slog.Value:
		return v
	case hclog.Format: // a format and its operands, rendered lazily
		if len(v) > 0 {
			if format, ok := v[0].(string); ok {
				return fmt.Sprintf(format, v[1:]...)
			}
		}
		return fmt.Sprint([]any(v)...)
	case raft.ServerAddress:
		return string(v)
	case raft.ServerID:
		return string(v)
	case raft.Server:
		return serverValue(v)
	case *raft.Server:
		if v == nil {
			return nil
		}
		return serverValue(*v)
	case error:
		if isNilPointer(v) {
			return nil
		}
		return v.Error()
	case fmt.Stringer:
		if isNilPointer(v) {
			return nil
		}
		return v.String()
	}
	return v
}

// serverValue is a raft.Server as a group: peer.id=n2 peer.address=…
// peer.suffrage=Voter in text, {"id":…,"address":…,"suffrage":…} in JSON.
func serverValue(s raft.Server) slog.Value {
	return slog.GroupValue(slog.String("id", string(s.ID)), slog.String("address", string(s.Address)),
		slog.String("suffrage", s.Suffrage.String()))
}

// isNilPointer reports whether v holds a nil pointer, whose methods may
// not be callable.
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(level hclog.Level) bool {
	return a.l.Enabled(context.Background(), slogLevel(level))
}

func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.args }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{l: a.l, name: a.name, args: append(append([]any{}, a.args...), args...), st: a.st}
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return &hclogAdapter{l: a.l, name: name, args: a.args, st: a.st}
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: a.l, name: name, args: a.args, st: a.st}
}

// SetLevel is ignored: the slog handler owns the level.
func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case a.IsDebug():
		return hclog.Debug
	case a.IsInfo():
		return hclog.Info
	case a.IsWarn():
		return hclog.Warn
	}
	return hclog.Error
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return lineWriter{a}
}

// lineWriter turns standard-library log lines (some raft internals use
// them) into slog records, keeping hclog's "[LEVEL]" prefix convention.
type lineWriter struct{ a *hclogAdapter }

func (w lineWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := hclog.Info
	for prefix, l := range map[string]hclog.Level{"[DEBUG]": hclog.Debug, "[TRACE]": hclog.Trace,
		"[WARN]": hclog.Warn, "[ERR]": hclog.Error, "[ERROR]": hclog.Error, "[INFO]": hclog.Info} {
		if strings.HasPrefix(msg, prefix) {
			level, msg = l, strings.TrimSpace(strings.TrimPrefix(msg, prefix))
			break
		}
	}
	w.a.Log(level, msg)
	return len(p), nil
}
