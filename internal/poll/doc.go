// Package poll is the one way kvselect's tests, harnesses and tools wait
// for a condition: call it at an interval until it holds, a fatal error
// says waiting cannot help, or the deadline passes; then report what was
// awaited and the condition's last error. It also has the context-aware
// sleep that retry loops use.
//
// Waiting on a condition rather than on time keeps tests deterministic:
// they go on as soon as the state they need is there, and a slow machine
// only makes them slower, never wrong.
package poll
