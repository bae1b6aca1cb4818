package ingest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kvselect/kvselect/indexer"
	"github.com/kvselect/kvselect/internal/testvectors"
)

// pythonWithZMQ finds a python3 that can import zmq and msgpack (Debian's
// python3-zmq and python3-msgpack install them for /usr/bin/python3).
// Under `make test` (KVSELECT_REQUIRE_INTEROP=1), which installs them,
// their absence fails the test instead of skipping it.
func pythonWithZMQ(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import zmq, msgpack").Run() == nil {
			return py
		}
	}
	msg := "no python3 with the zmq and msgpack modules (apt-get install python3-zmq python3-msgpack)"
	if os.Getenv("KVSELECT_REQUIRE_INTEROP") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// pyPub drives testdata/pypub.py, a publisher on real libzmq.
type pyPub struct {
	t        *testing.T
	cmd      *exec.Cmd
	in       io.WriteCloser
	out      *bufio.Scanner
	endpoint string
	replayEP string
}

func startPyPub(t *testing.T) *pyPub {
	t.Helper()
	py := pythonWithZMQ(t)
	vectors := testvectors.VectorsPath(t)
	cmd := exec.Command(py, filepath.Join("testdata", "pypub.py"), vectors)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pyPub{t: t, cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		in.Close() // EOF on stdin ends the script
		if err := cmd.Wait(); err != nil {
			t.Errorf("python publisher: %v", err)
		}
	})
	if !p.out.Scan() {
		t.Fatalf("python publisher printed no endpoints: %v", p.out.Err())
	}
	var eps struct{ Pub, Replay string }
	if err := json.Unmarshal(p.out.Bytes(), &eps); err != nil {
		t.Fatalf("python publisher endpoints %q: %v", p.out.Text(), err)
	}
	p.endpoint, p.replayEP = eps.Pub, eps.Replay
	return p
}

func (p *pyPub) do(format string, args ...any) {
	p.t.Helper()
	if _, err := fmt.Fprintf(p.in, format+"\n", args...); err != nil {
		p.t.Fatal(err)
	}
	if !p.out.Scan() || p.out.Text() != "ok" {
		p.t.Fatalf("python publisher answered %q to %q", p.out.Text(), fmt.Sprintf(format, args...))
	}
}

// TestInteropLibzmqPublisher indexes every payload of the vectors file as
// published by pyzmq (libzmq), through replay and live delivery.
func TestInteropLibzmqPublisher(t *testing.T) {
	p := startPyPub(t)
	h := newHarness(t)
	h.bs = 16 // the vectors' block size
	var seq uint64
	// The two blocks every vector is about, by their golden local hashes'
	// tokens (the local_hashes case of the vectors file).
	tokens := interopTokens(t)

	// Published before anyone subscribed: only the replay endpoint has it.
	p.do("V %d A1_stored_array_7 1", seq)
	h.register(1, p.endpoint, p.replayEP)
	h.waitSeq(1, seq)
	if got := h.held(1, tokens); got != 2 {
		t.Fatalf("after replayed A1: held %d, want 2", got)
	}
	// Then each vector live, in an order that alternates store and
	// removal, so every one changes the index visibly. A live message can
	// be lost while the subscription is still landing; each later message
	// reveals such a gap and the replay endpoint fills it, so heartbeats
	// (empty batches) follow until the vector is applied.
	steps := []struct {
		vector string
		held   uint32
	}{
		{"B1_removed_array", 0}, {"A3_stored_map", 2}, {"C1_cleared_array", 0},
		{"D1_stored_dynamo_dict", 2}, {"B2_removed_map", 0}, {"A4_stored_array_12", 2},
		{"B3_removed_array_4", 0}, {"A5_stored_map_v026", 2}, {"C2_cleared_map", 0},
		{"E1_stored_array_bytes", 2}, {"A2_stored_array_8", 2},
	}
	for _, st := range steps {
		seq++
		p.do("V %d %s 1", seq, st.vector)
		target := seq
		eventually(t, st.vector+" applied", func() bool {
			if got, ok := h.ix.Watermark(indexer.RankKey{Worker: 1}); ok && got >= target {
				return true
			}
			seq++
			p.do("H %d 1", seq)
			return false
		})
		if got := h.held(1, tokens); got != st.held {
			t.Fatalf("after %s: held %d blocks, want %d", st.vector, got, st.held)
		}
	}
	// A message lost on the wire is recovered from libzmq's ROUTER.
	seq++
	p.do("V %d B1_removed_array 0", seq)
	seq++
	p.do("H %d 1", seq)
	h.waitSeq(1, seq)
	st := h.status(1)
	if h.held(1, tokens) != 0 || st.LostMessages != 0 || st.Restarts != 0 || st.DroppedMalformed != 0 {
		t.Fatalf("after a replayed removal: held %d, status %+v", h.held(1, tokens), st)
	}
}

func interopTokens(t *testing.T) []uint32 {
	return testvectors.Load(t).ByName(t, "A1_stored_array_7").Expect.Events[0].TokenIDs
}
