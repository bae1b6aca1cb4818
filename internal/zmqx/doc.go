// Package zmqx holds kvselect's ZeroMQ plumbing on top of go-zeromq/zmq4:
// a guarded TCP/IPC transport that enforces frame and message size limits
// before zmq4 allocates anything (zmq4 itself sizes a buffer from the
// peer's length header), a handshake deadline, a write deadline with a
// slow-reader cut-off (ErrStalled), and the socket and endpoint helpers
// (Dial, DialSub, ListenPub, RankEndpoint) shared by the KV event
// listeners (ingest), the replica-sync publisher and peers (zmqsync) and
// the jepsen harness.
//
// The guarded connection also batches I/O that zmq4 does piecemeal: reads
// go through a 32 KiB buffer (zmq4 reads each frame's header and body
// apart, six syscalls per KV event message), and writes are gathered
// until a message, a command or the greeting is complete, then written at
// once. The guard follows the framing in both directions, so it sees
// exactly the bytes passed on and never holds back the end of a message.
package zmqx
