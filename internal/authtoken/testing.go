package authtoken

import (
	"os"
	"runtime"
)

// UnreadableForRoot returns, for tests, a path that opens as a regular
// file but that nobody can read, root included, and what the failed read
// says: Linux's /proc/self/mem, whose first page is never mapped, so that
// reading it from offset 0 fails with EIO. ok is false on a system without
// one. Tests of an unreadable token file use it because CI runs as root,
// which reads a file whatever its mode.
func UnreadableForRoot() (path, problem string, ok bool) {
	const mem = "/proc/self/mem"
	if runtime.GOOS != "linux" {
		return "", "", false
	}
	if fi, err := os.Stat(mem); err != nil || !fi.Mode().IsRegular() {
		return "", "", false
	}
	return mem, "input/output error", true
}
