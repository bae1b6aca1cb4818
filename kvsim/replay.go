package kvsim

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/kvselect/kvselect/internal/poll"
)

// replayEndSeq is the sequence frame that ends a replay answer (vLLM's
// END_SEQ, -1 as a signed 64-bit big-endian integer).
var replayEndSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// recvErrorPause keeps a ROUTER that keeps failing for an unexpected reason
// from spinning; zmq4 only fails Recv once its context is cancelled.
const recvErrorPause = 10 * time.Millisecond

// serveReplay answers replay requests on the rank's ROUTER until ctx is
// cancelled. A request is [identity, "", start_seq (8 bytes BE)] (a DEALER
// sends ["", start_seq]); the answer is every buffered message with
// seq >= start_seq, oldest first, then the end marker.
func (r *rankState) serveReplay(ctx context.Context) {
	for {
		msg, err := r.router.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Debug("replay receive failed", "endpoint", r.replayEP, "err", err)
			if poll.Sleep(ctx, recvErrorPause) != nil {
				return
			}
			continue
		}
		identity, start, ok := parseReplayRequest(msg.Frames)
		if !ok {
			r.log.Debug("malformed replay request ignored", "endpoint", r.replayEP, "frames", len(msg.Frames))
			continue
		}
		r.answerReplay(identity, start)
	}
}

// answerReplay sends the snapshot taken now; messages published while it
// is being sent are not included, as in vLLM.
func (r *rankState) answerReplay(identity []byte, start uint64) {
	entries := r.replaySince(start)
	r.log.Debug("replay", "start_seq", start, "messages", len(entries))
	for _, e := range entries {
		if err := r.router.Send(r.replayFrame(identity, seqBytes(e.seq), e.payload)); err != nil {
			r.log.Debug("replay send failed", "endpoint", r.replayEP, "err", err)
			return
		}
	}
	if err := r.router.Send(r.replayFrame(identity, replayEndSeq, []byte{})); err != nil {
		r.log.Debug("replay send failed", "endpoint", r.replayEP, "err", err)
	}
}

// replayFrame builds [identity, "", (topic,) seq, payload].
func (r *rankState) replayFrame(identity, seq, payload []byte) zmq4.Msg {
	if r.withTopic {
		return zmq4.NewMsgFrom(identity, []byte{}, r.topic, seq, payload)
	}
	return zmq4.NewMsgFrom(identity, []byte{}, seq, payload)
}

// parseReplayRequest accepts exactly [identity, "", 8-byte start_seq].
func parseReplayRequest(frames [][]byte) (identity []byte, start uint64, ok bool) {
	if len(frames) != 3 || len(frames[1]) != 0 || len(frames[2]) != 8 {
		return nil, 0, false
	}
	return frames[0], binary.BigEndian.Uint64(frames[2]), true
}
