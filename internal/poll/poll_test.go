package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func Test_Until(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name      string
		cond      func(n int) error
		timeout   time.Duration
		wantErr   error
		wantText  string
		wantCalls int // 0: any
	}{
		{name: "holds at once", cond: func(int) error { return nil }, timeout: time.Minute, wantCalls: 1},
		{name: "holds on the third call", cond: func(n int) error {
			if n < 3 {
				return fmt.Errorf("call %d", n)
			}
			return nil
		}, timeout: time.Minute, wantCalls: 3},
		{name: "fatal ends at once", cond: func(int) error { return Fatal(errBoom) }, timeout: time.Minute,
			wantErr: errBoom, wantText: "waiting until it holds: boom", wantCalls: 1},
		{name: "times out with the last error", cond: func(n int) error { return fmt.Errorf("not yet (%d)", n) },
			timeout: 30 * time.Millisecond, wantErr: ErrTimeout, wantText: "not yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := Within(context.Background(), tt.timeout, time.Millisecond, "it holds", func(context.Context) error {
				calls++
				return tt.cond(calls)
			})
			if tt.wantErr == nil && err != nil {
				t.Fatalf("err = %v, want nil", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantText != "" && !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("err = %q, want it to say %q", err, tt.wantText)
			}
			if tt.wantCalls != 0 && calls != tt.wantCalls {
				t.Fatalf("calls = %d, want %d", calls, tt.wantCalls)
			}
		})
	}
}

// fakeT records what Eventually reports.
type fakeT struct{ failed string }

func (f *fakeT) Helper()                           {}
func (f *fakeT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func Test_Eventually(t *testing.T) {
	var ft fakeT
	Eventually(&ft, 20*time.Millisecond, "never", func() error { return errors.New("still not") })
	if !strings.Contains(ft.failed, "waiting until never") || !strings.Contains(ft.failed, "still not") {
		t.Fatalf("Eventually reported %q", ft.failed)
	}
	ft = fakeT{}
	Eventually(&ft, time.Minute, "now", func() error { return nil })
	if ft.failed != "" {
		t.Fatalf("Eventually failed a condition that held: %q", ft.failed)
	}
}

func Test_Sleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on an ended context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v", err)
	}
}
