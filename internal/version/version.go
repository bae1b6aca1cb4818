package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the release; Commit the commit built. The Makefile sets them
// with -ldflags "-X github.com/kvselect/kvselect/internal/version.Version=...
// -X ....Commit=..." (make build VERSION=v1.2.3). Without Commit, the Go
// toolchain's VCS stamp is used when the build has one.
var (
	Version = "0.5.0-dev"
	Commit  = ""
)

// Info is what a build is.
type Info struct {
	Version   string
	Commit    string // "" when the build has no VCS stamp (go test, go run)
	Modified  bool   // the working tree had uncommitted changes
	GoVersion string
}

// Get returns this binary's build information.
func Get() Info {
	info := Info{Version: Version, GoVersion: runtime.Version()}
	if c, ok := strings.CutSuffix(Commit, "-modified"); Commit != "" {
		info.Commit, info.Modified = c, ok
		return info
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	return info
}

// String is the one-line form --version prints after the binary's name:
// "0.5.0-dev (commit 1a2b3c4d5e6f, go1.26.8)".
func (i Info) String() string {
	commit := "unknown"
	if i.Commit != "" {
		commit = i.Commit[:min(12, len(i.Commit))]
	}
	if i.Modified {
		commit += ", modified"
	}
	return fmt.Sprintf("%s (commit %s, %s)", i.Version, commit, i.GoVersion)
}
