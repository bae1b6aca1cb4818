package version

import (
	"os"
	"path/filepath"
	"regexp"
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

// The Python client (clients/python) is released on the server's line:
// its version (PEP 440, in pyproject.toml and kvselect/_version.py, which
// must agree) has the same major.minor as Version.
func Test_PythonClientOnTheServersLine(t *testing.T) {
	read := func(path string, re *regexp.Regexp) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join("..", "..", "clients", "python", path))
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindSubmatch(b)
		if m == nil {
			t.Fatalf("no version in %s (want a line matching %s)", path, re)
		}
		return string(m[1])
	}
	project := read("pyproject.toml", regexp.MustCompile(`(?m)^version\s*=\s*"([^"]+)"`))
	module := read(filepath.Join("kvselect", "_version.py"), regexp.MustCompile(`(?m)^__version__\s*=\s*"([^"]+)"`))
	if project != module {
		t.Fatalf("pyproject.toml says %q, kvselect/_version.py %q", project, module)
	}
	majorMinor := regexp.MustCompile(`^v?(\d+\.\d+)[.\-]`)
	server, client := majorMinor.FindStringSubmatch(Version), majorMinor.FindStringSubmatch(project)
	if server == nil || client == nil || server[1] != client[1] {
		t.Fatalf("server %q and Python client %q are not on one major.minor release line", Version, project)
	}
}
