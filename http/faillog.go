package http

import (
	"net/http"
	"sync"
	"time"

	"github.com/kvselect/kvselect/api"
)

// failureLogWindow is how long the repeats of a logged request failure
// stay at DEBUG.
const failureLogWindow = time.Minute

// failureLog keeps failed requests from flooding the log. A node cut off
// from its leader fails every write, keepalive and forwarded call alike
// (no_leader, unknown_outcome), and a WARN per request buried the first
// one under hundreds a minute. The first failure of each code logs a
// WARN; repeats of that code within failureLogWindow go to DEBUG and are
// counted, and the first one after the window logs a WARN again with how
// many were left out. Codes are a closed set (api.Code), so the map stays
// small. An internal error is always a WARN: it is no cluster condition
// that repeats, and each may have its own cause.
type failureLog struct {
	now func() time.Time // nil: time.Now

	mu     sync.Mutex
	byCode map[api.Code]*failureWindow
}

type failureWindow struct {
	start      time.Time // of the last WARN
	suppressed int       // repeats logged at DEBUG since
}

// admit reports whether a failure with code is worth a WARN now, and how
// many of its repeats went to DEBUG before it.
func (l *failureLog) admit(code api.Code) (warn bool, suppressed int) {
	if code == api.CodeInternal {
		return true, 0
	}
	now := time.Now
	if l.now != nil {
		now = l.now
	}
	t := now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byCode == nil {
		l.byCode = map[api.Code]*failureWindow{}
	}
	w := l.byCode[code]
	if w == nil || t.Sub(w.start) >= failureLogWindow {
		if w != nil {
			suppressed = w.suppressed
		}
		l.byCode[code] = &failureWindow{start: t}
		return true, suppressed
	}
	w.suppressed++
	return false, 0
}

// logFailure logs a request that failed with a 5xx (wrap).
func (s *Service) logFailure(r *http.Request, status int, err error) {
	code := codeOf(err)
	warn, suppressed := s.failures.admit(code)
	if !warn {
		s.log.Debug("request failed (a repeat: see the last warning with this code)", "method", r.Method, "path", r.URL.Path,
			"status", status, "code", code, "err", err)
		return
	}
	args := []any{"method", r.Method, "path", r.URL.Path, "status", status, "code", code, "err", err}
	if suppressed > 0 {
		args = append(args, "repeats_at_debug", suppressed, "window", failureLogWindow)
	}
	s.log.Warn("request failed", args...)
}
