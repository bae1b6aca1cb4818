// Package zmqx holds kvselect's ZeroMQ plumbing on top of go-zeromq/zmq4:
// a guarded TCP/IPC transport that enforces frame and message size limits
// before zmq4 allocates anything (zmq4 itself sizes a buffer from the
// peer's length header), a handshake deadline, and the endpoint helpers
// shared by KV event listeners and kvsim.
package zmqx
