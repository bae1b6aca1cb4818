package version

import (
	"runtime"
	"strings"
	"testing"
)

func Test_String(t *testing.T) {
	tests := []struct {
		info Info
		want string
	}{
		{Info{Version: "1.2.3", Commit: "0123456789abcdef", GoVersion: "go1.26.8"}, "1.2.3 (commit 0123456789ab, go1.26.8)"},
		{Info{Version: "1.2.3", Commit: "abc", Modified: true, GoVersion: "go1.26.8"}, "1.2.3 (commit abc, modified, go1.26.8)"},
		{Info{Version: "dev", GoVersion: "go1.26.8"}, "dev (commit unknown, go1.26.8)"},
	}
	for _, tt := range tests {
		if got := tt.info.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
	defer func(c string) { Commit = c }(Commit)
	Commit = "0123456789ab-modified"
	if got := Get(); got.Commit != "0123456789ab" || !got.Modified {
		t.Fatalf("Get() with Commit set by the linker = %+v", got)
	}
	Commit = ""
	if got := Get(); got.Version != Version || got.GoVersion != runtime.Version() || !strings.Contains(got.String(), runtime.Version()) {
		t.Fatalf("Get() = %+v", got)
	}
}
