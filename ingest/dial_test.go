package ingest

import (
	"maps"
	"strings"
	"testing"
)

func TestParseDial(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want map[string]string
		err  string
	}{
		{in: "", want: map[string]string{}},
		{in: " 127.0.0.1:5557=127.0.0.1:6001 , h:1=h:2", want: map[string]string{"127.0.0.1:5557": "127.0.0.1:6001", "h:1": "h:2"}},
		{in: "127.0.0.1:5557", err: "is not host:port=host:port"},
		{in: "127.0.0.1=127.0.0.1:6001", err: "is not host:port"},
		{in: "h:1=:2", err: "is not host:port"},
		{in: "h:1=h:2,h:1=h:3", err: "mapped twice"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDial(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseDial(%q) = %v, %v; want error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("ParseDial(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

// A worker registered with addresses nobody listens on is followed
// through the ones Config.Dial gives for them, stream and replay alike,
// while its status keeps showing what the catalog holds.
func TestDialRewritesWorkerEndpoints(t *testing.T) {
	p := newTestPub(t, true)
	const stream, replay = "tcp://192.0.2.1:5557", "tcp://192.0.2.1:5558"
	h := newHarnessWith(t, func(c *Config) {
		c.Dial = map[string]string{
			"192.0.2.1:5557": strings.TrimPrefix(p.endpoint, "tcp://"),
			"192.0.2.1:5558": strings.TrimPrefix(p.replayEP, "tcp://"),
		}
	})
	h.register(1, stream, replay)
	a := blockTokens(1, 2)
	// Before the subscription: only the (rewritten) replay delivers it.
	p.publish(0, storedPayload(t, []uint64{10, 11}, nil, a), true)
	h.waitSeq(1, 0)
	p.subscribed()
	p.publish(1, storedPayload(t, []uint64{12}, nil, blockTokens(2, 1)), true)
	h.waitSeq(1, 1)
	if got := h.held(1, a); got != 2 {
		t.Fatalf("held %d blocks, want 2", got)
	}
	if st := h.status(1); st.Endpoint != stream || st.ReplayEndpoint != replay || st.State != StateActive {
		t.Fatalf("status %+v, want the registered endpoints, active", st)
	}
}
