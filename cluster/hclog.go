package cluster

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogAdapter lets hashicorp/raft log through log/slog, so the whole node
// has one log stream with one format and level.
type hclogAdapter struct {
	l    *slog.Logger
	name string
	args []any
}

func newHCLog(l *slog.Logger) hclog.Logger { return &hclogAdapter{l: l} }

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
	l := a.l
	if a.name != "" {
		l = l.With("logger", a.name)
	}
	all := append(append([]any{}, a.args...), args...)
	for i, v := range all {
		// hclog.Fmt values are a format and its operands, rendered lazily.
		if f, ok := v.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				all[i] = fmt.Sprintf(format, f[1:]...)
			}
		}
	}
	l.Log(context.Background(), slogLevel(level), msg, all...)
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
	return &hclogAdapter{l: a.l, name: a.name, args: append(append([]any{}, a.args...), args...)}
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return &hclogAdapter{l: a.l, name: name, args: a.args}
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{l: a.l, name: name, args: a.args}
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
