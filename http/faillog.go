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
// counted. The count is reported when the window is over: by the first
// failure of that code after it (a WARN again, with how many were left
// out), or, if another code fails first, by a summary line then, or at
// the latest when the service closes. No timer or goroutine is needed:
// a count nobody reported yet is still there when the next failure, of
// any code, or the shutdown comes. Codes are a closed set (api.Code), so
// the map stays small. An internal error is always a WARN: it is no
// cluster condition that repeats, and each may have its own cause.
type failureLog struct {
	now func() time.Time // nil: time.Now

	mu     sync.Mutex
	byCode map[api.Code]*failureWindow
}

type failureWindow struct {
	start      time.Time // of the last WARN
	suppressed int       // repeats logged at DEBUG since
}

// endedWindow is a window that is over with repeats nobody reported.
type endedWindow struct {
	code       api.Code
	start      time.Time
	suppressed int
}

// admit reports whether a failure with code is worth a WARN now, and how
// many of its repeats went to DEBUG before it; ended are the other codes'
// windows that are over with repeats to report, which it forgets.
func (l *failureLog) admit(code api.Code) (warn bool, suppressed int, ended []endedWindow) {
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
	for c, w := range l.byCode {
		if c != code && t.Sub(w.start) >= failureLogWindow {
			if w.suppressed > 0 {
				ended = append(ended, endedWindow{code: c, start: w.start, suppressed: w.suppressed})
			}
			delete(l.byCode, c)
		}
	}
	if code == api.CodeInternal {
		return true, 0, ended
	}
	w := l.byCode[code]
	if w == nil || t.Sub(w.start) >= failureLogWindow {
		if w != nil {
			suppressed = w.suppressed
		}
		l.byCode[code] = &failureWindow{start: t}
		return true, suppressed, ended
	}
	w.suppressed++
	return false, 0, ended
}

// flush returns every window with repeats nobody reported, over or not,
// and forgets them all: the service is closing.
func (l *failureLog) flush() []endedWindow {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []endedWindow
	for c, w := range l.byCode {
		if w.suppressed > 0 {
			out = append(out, endedWindow{code: c, start: w.start, suppressed: w.suppressed})
		}
	}
	l.byCode = nil
	return out
}

// logEnded reports the repeats of windows that are over.
func (s *Service) logEnded(ended []endedWindow) {
	for _, e := range ended {
		s.log.Warn("request failures repeated at DEBUG since the last warning with this code",
			"code", e.code, "repeats_at_debug", e.suppressed, "since", e.start)
	}
}

// Close reports the repeats of failures that no later failure reported
// yet. The server calls it as it shuts down, once no request is served.
func (s *Service) Close() { s.logEnded(s.failures.flush()) }

// logFailure logs a request that failed with a 5xx (wrap).
func (s *Service) logFailure(r *http.Request, status int, err error) {
	code := codeOf(err)
	warn, suppressed, ended := s.failures.admit(code)
	s.logEnded(ended)
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
