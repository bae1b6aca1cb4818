// Package testlog gives tests a log sink they can read while the code
// under test, and its goroutines, still write to it: a mutex-guarded
// buffer and the slog text logger over it that tests put in a Config.
package testlog
