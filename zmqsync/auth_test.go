package zmqsync

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvselect/kvselect/internal/authtoken"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// The MAC of the empty message [1, "n1", []] under the token "s3cret", as
// openssl computes it:
//
//	printf 'kvselect replica-sync v1' | openssl dgst -sha256 -hmac s3cret
//	printf '\x93\x01\xa2n1\x90' | openssl dgst -sha256 -mac HMAC -macopt hexkey:<the key above>
//
// Another implementation of the wire format checks itself against it.
func Test_AppendMAC_Vector(t *testing.T) {
	payload := AppendMessage(nil, &Message{Version: PreviousVersion, Origin: "n1"})
	if got := hex.EncodeToString(payload); got != "9301a26e3190" {
		t.Fatalf("payload %s", got)
	}
	if key := hex.EncodeToString(deriveKey("s3cret")); key != "1a562e526498ec27b78efa3f6e2df7df88ed62523b74311db452b50c6bfa5be2" {
		t.Fatalf("key %s", key)
	}
	const want = "1d09d52e3075ab6f2b806538c909bca95f6227b5342f29f6cd01ae374508fabb"
	if got := hex.EncodeToString(AppendMAC(nil, payload, "s3cret")); got != want {
		t.Fatalf("MAC %s, want %s", got, want)
	}
	// Reused hash state gives the same MAC, message after message, and
	// follows a change of token.
	var m macer
	for range 3 {
		if got := hex.EncodeToString(m.sum(nil, "s3cret", payload)); got != want {
			t.Fatalf("reused state: MAC %s", got)
		}
	}
	if got := m.sum(nil, "other", payload); hex.EncodeToString(got) == want || !slices.Equal(got, AppendMAC(nil, payload, "other")) {
		t.Fatal("a new token does not rebuild the hash state")
	}
}

// Test_Open: which messages a node accepts, with and without a token, and
// during the grace after a rotation.
func Test_Open(t *testing.T) {
	v2 := wireV2("n1", 1, 1, testAdmission("r1"))
	payload := AppendMessage(nil, &v2)
	malformed := payload[:len(payload)-1]
	topic := []byte(Topic)
	mac := func(token string, p []byte) []byte { return AppendMAC(nil, p, token) }
	flipped := mac("cur", payload)
	flipped[MACSize-1] ^= 1
	noToken := &authtoken.Secret{}
	cur := &authtoken.Secret{Token: "cur"}
	rotated := &authtoken.Secret{Token: "cur", Previous: "old", Rotated: time.Now()}
	rotatedLongAgo := &authtoken.Secret{Token: "cur", Previous: "old", Rotated: time.Now().Add(-time.Hour)}
	tests := []struct {
		name   string
		frames [][]byte
		sec    *authtoken.Secret
		grace  time.Duration
		want   string
	}{
		{"no token, no MAC", [][]byte{topic, payload}, noToken, 0, ""},
		{"no token ignores a MAC", [][]byte{topic, payload, mac("cur", payload)}, noToken, 0, ""},
		{"no token ignores a wrong MAC", [][]byte{topic, payload, flipped}, noToken, 0, ""},
		{"MAC frame of the wrong size", [][]byte{topic, payload, []byte("extra")}, cur, 0, "frames"},
		{"empty MAC frame", [][]byte{topic, payload, {}}, noToken, 0, "frames"},
		{"four frames", [][]byte{topic, payload, mac("cur", payload), {}}, cur, 0, "frames"},
		{"topic only", [][]byte{topic}, cur, 0, "frames"},
		{"other topic", [][]byte{[]byte("x"), payload, mac("cur", payload)}, cur, 0, "frames"},
		{"token, no MAC", [][]byte{topic, payload}, cur, 0, "unauthenticated"},
		{"token, right MAC", [][]byte{topic, payload, mac("cur", payload)}, cur, 0, ""},
		{"token, one bit off", [][]byte{topic, payload, flipped}, cur, 0, "unauthenticated"},
		{"token, a stranger's MAC", [][]byte{topic, payload, mac("guess", payload)}, cur, 0, "unauthenticated"},
		{"token, the MAC of another message", [][]byte{topic, payload, mac("cur", malformed)}, cur, 0, "unauthenticated"},
		{"token, the bare token as key", [][]byte{topic, payload, hmacWithRawToken("cur", payload)}, cur, 0, "unauthenticated"},
		{"right MAC, malformed payload", [][]byte{topic, malformed, mac("cur", malformed)}, cur, 0, "malformed"},
		{"previous token within the grace", [][]byte{topic, payload, mac("old", payload)}, rotated, time.Minute, ""},
		{"current token after a rotation", [][]byte{topic, payload, mac("cur", payload)}, rotated, time.Minute, ""},
		{"previous token past the grace", [][]byte{topic, payload, mac("old", payload)}, rotatedLongAgo, time.Minute, "unauthenticated"},
		{"previous token, no grace", [][]byte{topic, payload, mac("old", payload)}, rotated, -1, "unauthenticated"},
	}
	var o opener // reused, as a peer does
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Message{Origin: "stale", Events: []replica.Event{{Kind: replica.KindFree}}}
			got, err := o.open(tt.frames, tt.sec, tt.grace, &m)
			if got != tt.want || (got == "") != (err == nil) {
				t.Fatalf("open = %q, %v; want %q", got, err, tt.want)
			}
			if got != "" && (m.Origin != "" || len(m.Events) != 0) {
				t.Fatalf("a dropped message left %+v", m)
			}
			if got == "" && (m.Origin != "n1" || len(m.Events) != 1 || m.Events[0].ReservationID != "r1") {
				t.Fatalf("accepted message decoded as %+v", m)
			}
		})
	}
}

// hmacWithRawToken is the MAC a sender that skipped the key derivation
// would compute.
func hmacWithRawToken(token string, payload []byte) []byte {
	h := hmac.New(sha256.New, []byte(token))
	h.Write(payload)
	return h.Sum(nil)
}

// droppedMessages reads kvselect_replica_sync_dropped_messages_total for
// one reason, as a scrape would.
func droppedMessages(t *testing.T, s *Syncer, reason string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "kvselect_replica_sync_dropped_messages_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no dropped-messages counter for reason %q", reason)
	return 0
}

func startAuthSyncer(t *testing.T, id string, rec *recorder, auth *authtoken.Holder, peers ...string) *Syncer {
	t.Helper()
	s, err := Start(Config{NodeID: id, Listen: "tcp://127.0.0.1:0", Peers: peers, Apply: rec.apply, Auth: auth,
		BackoffMin: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Test_AuthenticatedSync: nodes that share the token sync; a stranger that
// can get its PUB followed (a registered endpoint, a taken-over address)
// cannot inject events without the token: its messages, unsigned or with a
// wrong MAC, are dropped and counted, never applied.
func Test_AuthenticatedSync(t *testing.T) {
	var ra, rb recorder
	a := startAuthSyncer(t, "a", &ra, authtoken.NewHolder("s3cret"))
	b := startAuthSyncer(t, "b", &rb, authtoken.NewHolder("s3cret"), a.Endpoint())
	asPrevious(a, b) // v1: the messages forged below need no counter
	publishUntil(t, a, &rb, "probe-a")
	a.Publish(testAdmission("from-a"))
	eventually(t, "b applies a's admission", func() bool { return slices.Contains(rb.got(), "a:admission:from-a") })

	evil, evilEP := rawPub(t)
	if _, err := b.Register(evilEP); err != nil {
		t.Fatal(err)
	}
	forgedMsg := wireV1("a", testAdmission("forged"))
	forged := AppendMessage(nil, &forgedMsg)
	unsigned := zmq4.NewMsgFrom([]byte(Topic), forged)
	guessed := zmq4.NewMsgFrom([]byte(Topic), forged, AppendMAC(nil, forged, "guess"))
	eventually(t, "the stranger's messages arrive and are dropped as unauthenticated", func() bool {
		_ = evil.Send(unsigned)
		_ = evil.Send(guessed)
		return droppedMessages(t, b, "unauthenticated") >= 2
	})
	// A message with the right MAC on the same subscription applies: the
	// drops were the MAC's doing, not the connection's.
	signedMsg := wireV1("a", testAdmission("signed"))
	signed := AppendMessage(nil, &signedMsg)
	eventually(t, "a message with the right MAC applies", func() bool {
		_ = evil.Send(zmq4.NewMsgFrom([]byte(Topic), signed, AppendMAC(nil, signed, "s3cret")))
		return slices.Contains(rb.got(), "a:admission:signed")
	})
	if slices.Contains(rb.got(), "a:admission:forged") {
		t.Fatalf("applied a forged admission: %v", rb.got())
	}
	if droppedMessages(t, b, "malformed") != 0 {
		t.Fatal("an unauthenticated message reached the decoder")
	}
}

// Test_SenderFrames: without a token the wire is unchanged (topic and
// payload); with one every message carries the MAC of its payload, under
// the token current when it is sent.
func Test_SenderFrames(t *testing.T) {
	auth := &authtoken.Holder{}
	var r recorder
	a := startAuthSyncer(t, "a", &r, auth)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	if err := sub.SetOption(zmq4.OptionSubscribe, Topic); err != nil {
		t.Fatal(err)
	}
	if err := sub.Dial(a.Endpoint()); err != nil {
		t.Fatal(err)
	}
	frames := make(chan [][]byte, 1024)
	go func() {
		for {
			msg, err := sub.Recv()
			if err != nil {
				return
			}
			frames <- msg.Frames
		}
	}()
	// next publishes until a message arrives that carries want, and
	// returns its frames.
	next := func(want string) [][]byte {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			a.Publish(replica.Event{Kind: replica.KindFree, ReservationID: want})
			select {
			case fr := <-frames:
				var m Message
				if len(fr) >= 2 && DecodeMessage(fr[1], &m) == nil && slices.ContainsFunc(m.Events, func(ev replica.Event) bool { return ev.ReservationID == want }) {
					return fr
				}
			case <-deadline:
				t.Fatalf("no message with %s", want)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	if fr := next("plain"); len(fr) != 2 {
		t.Fatalf("without a token: %d frames", len(fr))
	}
	auth.Set("first")
	fr := next("first")
	if len(fr) != 3 || !slices.Equal(fr[2], AppendMAC(nil, fr[1], "first")) {
		t.Fatalf("with a token: %d frames, MAC %x", len(fr), fr[len(fr)-1])
	}
	auth.Set("second")
	if fr := next("second"); len(fr) != 3 || !slices.Equal(fr[2], AppendMAC(nil, fr[1], "second")) {
		t.Fatal("after a rotation the MAC is not under the new token")
	}
}

// Test_RotationGrace: a node that has rotated still accepts a peer that
// has not, for the grace; one whose grace is off does not.
func Test_RotationGrace(t *testing.T) {
	var ra, rb, rc recorder
	a := startAuthSyncer(t, "a", &ra, authtoken.NewHolder("old"))
	bAuth := authtoken.NewHolder("old")
	b := startAuthSyncer(t, "b", &rb, bAuth, a.Endpoint())
	cAuth := authtoken.NewHolder("old")
	c, err := Start(Config{NodeID: "c", Listen: "tcp://127.0.0.1:0", Peers: []string{a.Endpoint()}, Apply: rc.apply,
		Auth: cAuth, PreviousTokenGrace: -1, BackoffMin: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	inCluster(a, b, c)
	publishUntil(t, a, &rb, "probe-b")
	publishUntil(t, a, &rc, "probe-c")
	bAuth.Set("new")
	cAuth.Set("new")
	a.Publish(testAdmission("during-rotation"))
	eventually(t, "b (within the grace) applies a's admission under the old token", func() bool {
		return slices.Contains(rb.got(), "a:admission:during-rotation")
	})
	// a rotates too; once c applies a message under the new token, the
	// earlier one has come and gone (one PUB to one SUB keeps order).
	a.cfg.Auth.Set("new")
	publishUntil(t, a, &rc, "probe-after")
	if droppedMessages(t, c, "unauthenticated") < 1 || slices.Contains(rc.got(), "a:admission:during-rotation") {
		t.Fatal("c applied a message under the previous token with no grace")
	}
}

// The tokens FuzzOpenMessage's node knows: it has rotated from fuzzOld to
// fuzzToken and is within the grace.
const (
	fuzzToken = "fuzz-token"
	fuzzOld   = "fuzz-old"
)

// openFuzzSeeds are written to testdata/fuzz/FuzzOpenMessage by -update:
// payloads of the decoder's corpus, each with the MAC of the current
// token, of the previous one, of a stranger, a MAC one bit off, and none.
func openFuzzSeeds() map[string][][]byte {
	seeds := map[string][][]byte{}
	payloads := wireFuzzSeeds()
	for _, name := range []string{"v1-admission", "v1-mixed-short", "v1-truncated-admission", "v1-trailing-fields",
		"v2-admission", "v2-live", "v2-want", "v2-truncated-live", "v2-trailing-fields", "v3"} {
		p := payloads[name]
		seeds[name+"-mac"] = [][]byte{p, AppendMAC(nil, p, fuzzToken)}
		seeds[name+"-previous-mac"] = [][]byte{p, AppendMAC(nil, p, fuzzOld)}
		seeds[name+"-no-mac"] = [][]byte{p, nil}
	}
	p := payloads["v1-admission"]
	seeds["v1-admission-stranger-mac"] = [][]byte{p, AppendMAC(nil, p, "stranger")}
	flipped := AppendMAC(nil, p, fuzzToken)
	flipped[0] ^= 0x80
	seeds["v1-admission-flipped-mac"] = [][]byte{p, flipped}
	seeds["v1-admission-short-mac"] = [][]byte{p, AppendMAC(nil, p, fuzzToken)[:MACSize-1]}
	return seeds
}

// FuzzOpenMessage runs the receive path of a node with a token on a
// payload and a MAC frame (none when mac is empty): it never panics, it
// accepts exactly the messages that decode and carry the MAC of the
// current or the previous token, and what it accepts decodes as
// DecodeMessage would. A node without a token accepts the same payloads
// whatever the MAC.
func FuzzOpenMessage(f *testing.F) {
	for _, args := range openFuzzSeeds() {
		f.Add(args[0], args[1])
	}
	withToken := &authtoken.Secret{Token: fuzzToken, Previous: fuzzOld, Rotated: time.Now()}
	var o opener
	f.Fuzz(func(t *testing.T, payload, mac []byte) {
		frames := [][]byte{[]byte(Topic), payload}
		if len(mac) > 0 {
			frames = append(frames, mac)
		}
		var want Message
		decodeErr := DecodeMessage(payload, &want)
		authentic := len(mac) > 0 && (hmac.Equal(mac, AppendMAC(nil, payload, fuzzToken)) || hmac.Equal(mac, AppendMAC(nil, payload, fuzzOld)))
		wellFramed := len(mac) == 0 || len(mac) == MACSize

		var m Message
		reason, err := o.open(frames, withToken, time.Hour, &m)
		if (reason == "") != (authentic && decodeErr == nil) || (reason == "") != (err == nil) {
			t.Fatalf("with a token: %q, %v (authentic %v, decode error %v)", reason, err, authentic, decodeErr)
		}
		if reason == "" && wireMessagesEqual(&m, &want) != "" {
			t.Fatalf("open and DecodeMessage disagree: %s", wireMessagesEqual(&m, &want))
		}
		if reason != "" && (m.Origin != "" || len(m.Events) != 0) {
			t.Fatalf("a dropped message left %+v", m)
		}
		reason, _ = o.open(frames, &authtoken.Secret{}, 0, &m)
		if (reason == "") != (wellFramed && decodeErr == nil) {
			t.Fatalf("without a token: %q (decode error %v)", reason, decodeErr)
		}
	})
}

// BenchmarkMAC is the cost a token adds per message: one MAC on the
// sender, one check on each receiver, for a message of one admission with
// 128 hashes (about 1.3 kB) and one of 64 such admissions.
func BenchmarkMAC(b *testing.B) {
	for _, events := range []int{1, 64} {
		m := wireBenchMessage(events, 128)
		payload := AppendMessage(nil, &m)
		frames := [][]byte{[]byte(Topic), payload, AppendMAC(nil, payload, "bench-token")}
		sec := &authtoken.Secret{Token: "bench-token"}
		b.Run(fmt.Sprintf("events=%d/sign", events), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			var mac macer
			buf := make([]byte, 0, MACSize)
			for b.Loop() {
				buf = mac.sum(buf[:0], sec.Token, payload)
			}
		})
		b.Run(fmt.Sprintf("events=%d/verify", events), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			var o opener
			for b.Loop() {
				if !o.verify(sec, 0, frames[1], frames[2]) {
					b.Fatal("rejected")
				}
			}
		})
	}
}
