package zmqsync

import (
	"bytes"
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/kvselect/kvselect/api"
	"github.com/kvselect/kvselect/internal/msgpackx"
	"github.com/kvselect/kvselect/scheduler/replica"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/v*.bin and the fuzz seed corpus from the encoder")

// wireCluster is the cluster id of the v2 vectors (the one of fsm's golden
// files).
var wireCluster = ClusterID{0x5f, 0x0c, 0x2d, 0x3e, 0x4a, 0x1b, 0x6c, 0x7d, 0x8e, 0x9f, 0xa0, 0xb1, 0xc2, 0xd3, 0xe4, 0xf5}

// wireV2 is a v2 message of the test cluster.
func wireV2(origin string, epoch, counter uint64, events ...replica.Event) Message {
	return Message{Version: Version, Origin: origin, ClusterID: wireCluster, Epoch: epoch, Counter: counter, Events: events}
}

// wireV1 is a message of the previous schema.
func wireV1(origin string, events ...replica.Event) Message {
	return Message{Version: PreviousVersion, Origin: origin, Events: events}
}

func wireLive(set, asOf uint64, after, through string, ids []string, prefilling ...uint32) replica.Event {
	return replica.Event{Kind: replica.KindLive, Live: &replica.LivePart{Set: set, AsOf: asOf, After: after, Through: through, IDs: ids, Prefilling: prefilling}}
}

func wireWant(target string, epoch uint64, ids ...string) replica.Event {
	return replica.Event{Kind: replica.KindWant, Want: &replica.Want{Target: target, Epoch: epoch, IDs: ids}}
}

// t0 is a plausible booking time (November 2023).
var wireT0 = time.Unix(0, 1_700_000_000_000_000_000)

func wireAdmission(id string, hashes ...uint64) replica.Event {
	return replica.Event{
		Kind: replica.KindAdmission, ReservationID: id, Model: "llama3:8b", Tenant: "default",
		WorkerID: 7, DPRank: 1, BlockSize: 16, SequenceHashes: hashes, Chained: true,
		ISL: 100, PrefillTokens: 68, Admitted: wireT0,
	}
}

// maxAdmission has every field at the largest value a receiver accepts.
func wireMaxAdmission() replica.Event {
	return replica.Event{
		Kind: replica.KindAdmission, ReservationID: strings.Repeat("r", api.MaxIDLen),
		Model: strings.Repeat("m", api.MaxNameLen), Tenant: strings.Repeat("t", api.MaxNameLen),
		WorkerID: math.MaxUint64, DPRank: math.MaxUint32, BlockSize: math.MaxUint32,
		SequenceHashes: []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64},
		Chained:        true, ISL: api.MaxISLTokens, PrefillTokens: api.MaxISLTokens,
		Admitted: time.Unix(0, math.MaxInt64),
	}
}

// minAdmission has every field at the smallest value a receiver accepts.
func wireMinAdmission() replica.Event {
	return replica.Event{
		Kind: replica.KindAdmission, ReservationID: "a", Model: "m", Tenant: "t",
		BlockSize: 1, SequenceHashes: []uint64{}, ISL: 1, Admitted: time.Unix(0, 1),
	}
}

// goldenMessages are pinned byte for byte in testdata/v<version>-<name>.bin.
func wireGoldenMessages() []struct {
	name string
	msg  Message
} {
	return []struct {
		name string
		msg  Message
	}{
		{"empty", wireV1("n1")},
		{"admission", wireV1("n1", wireAdmission("res-1", 0x1122334455667788, 0x99aabbccddeeff00))},
		{"prefill-complete", wireV1("n2", replica.Event{Kind: replica.KindPrefillComplete, ReservationID: "res-1"})},
		{"free", wireV1("n3", replica.Event{Kind: replica.KindFree, ReservationID: "res-1"})},
		{"mixed", wireV1(strings.Repeat("o", MaxOriginLen),
			wireAdmission("res-2", 42), wireMinAdmission(), wireMaxAdmission(),
			replica.Event{Kind: replica.KindPrefillComplete, ReservationID: "res-2"},
			replica.Event{Kind: replica.KindFree, ReservationID: "res-2"},
		)},
		{"empty", wireV2("n1", 1, 1)},
		{"admission", wireV2("n1", 12, 7, wireAdmission("res-1", 0x1122334455667788, 0x99aabbccddeeff00))},
		{"end", wireV2("n2", 13, 2, replica.Event{Kind: replica.KindPrefillComplete, ReservationID: "res-1", BookedBy: "n1"},
			replica.Event{Kind: replica.KindFree, ReservationID: "res-1", BookedBy: "n1"})},
		{"live", wireV2("n1", 12, 8, wireLive(3, 7, "", "", []string{"res-1", "res-2"}, 1))},
		{"want", wireV2("n3", 40, 2, wireWant("n1", 12, "res-3", "res-1"))},
		{"mixed", wireV2(strings.Repeat("o", MaxOriginLen), math.MaxUint64, math.MaxUint64,
			wireAdmission("res-2", 42), wireMinAdmission(), wireMaxAdmission(),
			replica.Event{Kind: replica.KindPrefillComplete, ReservationID: "res-2"},
			replica.Event{Kind: replica.KindFree, ReservationID: "res-2", BookedBy: strings.Repeat("b", MaxOriginLen)},
			wireLive(math.MaxUint64, math.MaxUint64, "a", strings.Repeat("z", api.MaxIDLen), []string{"b", "res-2", "z"}, 0, 2),
			wireLive(1, 0, "", "", nil),
			wireWant(strings.Repeat("t", MaxOriginLen), math.MaxUint64, strings.Repeat("r", api.MaxIDLen)),
		)},
	}
}

// goldenPath is where a golden message is pinned.
func goldenPath(name string, m *Message) string {
	v := m.Version
	if v == 0 {
		v = Version
	}
	return filepath.Join("testdata", fmt.Sprintf("v%d-%s.bin", v, name))
}

// messagesEqual reports the first difference between two messages, or "".
// Nil and empty lists are equal; times are compared as UnixNano, the
// precision of the wire; an event's Epoch and Counter must be its
// message's (the decoder copies them) or zero (as a sender writes them).
func wireMessagesEqual(got, want *Message) string {
	gv, wv := cmp.Or(got.Version, Version), cmp.Or(want.Version, Version)
	switch {
	case gv != wv:
		return fmt.Sprintf("version %d, want %d", gv, wv)
	case got.Origin != want.Origin:
		return fmt.Sprintf("origin %q, want %q", got.Origin, want.Origin)
	case got.ClusterID != want.ClusterID || got.Epoch != want.Epoch || got.Counter != want.Counter:
		return fmt.Sprintf("header %s/%d/%d, want %s/%d/%d", got.ClusterID, got.Epoch, got.Counter,
			want.ClusterID, want.Epoch, want.Counter)
	case len(got.Events) != len(want.Events):
		return fmt.Sprintf("%d events, want %d", len(got.Events), len(want.Events))
	}
	for i := range got.Events {
		g, w := got.Events[i], want.Events[i]
		for _, ev := range []*replica.Event{&g, &w} {
			if (ev.Epoch != 0 || ev.Counter != 0) && (ev.Epoch != got.Epoch || ev.Counter != got.Counter) {
				return fmt.Sprintf("event %d: epoch %d, counter %d, not its message's", i, ev.Epoch, ev.Counter)
			}
			ev.Epoch, ev.Counter = 0, 0
			if ev.Live != nil {
				l := *ev.Live
				l.IDs, l.Prefilling = append([]string{}, l.IDs...), append([]uint32{}, l.Prefilling...)
				ev.Live = &l
			}
			if ev.Want != nil {
				w := *ev.Want
				w.IDs = append([]string{}, w.IDs...)
				ev.Want = &w
			}
		}
		if !slices.Equal(g.SequenceHashes, w.SequenceHashes) {
			return fmt.Sprintf("event %d: hashes %v, want %v", i, g.SequenceHashes, w.SequenceHashes)
		}
		if g.Admitted.UnixNano() != w.Admitted.UnixNano() && !(g.Admitted.IsZero() && w.Admitted.IsZero()) {
			return fmt.Sprintf("event %d: admitted %v, want %v", i, g.Admitted, w.Admitted)
		}
		g.SequenceHashes, w.SequenceHashes = nil, nil
		g.Admitted, w.Admitted = time.Time{}, time.Time{}
		if !reflect.DeepEqual(g, w) {
			return fmt.Sprintf("event %d: %+v, want %+v", i, g, w)
		}
	}
	return ""
}

func Test_AppendMessage_Golden(t *testing.T) {
	for _, tc := range wireGoldenMessages() {
		path := goldenPath(tc.name, &tc.msg)
		t.Run(filepath.Base(path), func(t *testing.T) {
			got := AppendMessage(nil, &tc.msg)
			if *updateGolden {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoding drifted from %s:\n got %x\nwant %x\n"+
					"an incompatible change needs a new Version; a compatible one only appends fields (doc.go)", path, got, want)
			}
			var m Message
			if err := DecodeMessage(want, &m); err != nil {
				t.Fatalf("decode %s: %v", path, err)
			}
			if d := wireMessagesEqual(&m, &tc.msg); d != "" {
				t.Fatalf("decode %s: %s", path, d)
			}
		})
	}
}

// Test_DecodeMessage_HandWritten pins the schema independently of the
// encoder: these bytes were written from doc.go, not produced by the code.
func Test_DecodeMessage_HandWritten(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want Message
	}{{
		name: "free",
		// [1, "n1", [[3, "r1"]]]
		b:    []byte{0x93, 0x01, 0xa2, 'n', '1', 0x91, 0x92, 0x03, 0xa2, 'r', '1'},
		want: Message{Version: PreviousVersion, Origin: "n1", Events: []replica.Event{{Kind: replica.KindFree, ReservationID: "r1"}}},
	}, {
		name: "prefill complete and free",
		// [1, "n1", [[2, "r1"], [3, "r2"]]]
		b: []byte{0x93, 0x01, 0xa2, 'n', '1', 0x92, 0x92, 0x02, 0xa2, 'r', '1', 0x92, 0x03, 0xa2, 'r', '2'},
		want: Message{Version: PreviousVersion, Origin: "n1", Events: []replica.Event{
			{Kind: replica.KindPrefillComplete, ReservationID: "r1"}, {Kind: replica.KindFree, ReservationID: "r2"},
		}},
	}, {
		name: "admission",
		// [1, "n1", [[1, "r1", "m", "t", 7, 0, 16, [1, 2^64-1], true, 10, 5, 1.7e18]]]
		b: []byte{0x93, 0x01, 0xa2, 'n', '1', 0x91,
			0x9c, 0x01, 0xa2, 'r', '1', 0xa1, 'm', 0xa1, 't', 0x07, 0x00, 0x10,
			0x92, 0x01, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			0xc3, 0x0a, 0x05, 0xcf, 0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x00, 0x00},
		want: Message{Version: PreviousVersion, Origin: "n1", Events: []replica.Event{{
			Kind: replica.KindAdmission, ReservationID: "r1", Model: "m", Tenant: "t", WorkerID: 7, DPRank: 0,
			BlockSize: 16, SequenceHashes: []uint64{1, math.MaxUint64}, Chained: true, ISL: 10, PrefillTokens: 5,
			Admitted: wireT0,
		}}},
	}, {
		name: "free with the booking node",
		// [1, "n1", [[3, "r1", "n2"]]]
		b:    []byte{0x93, 0x01, 0xa2, 'n', '1', 0x91, 0x93, 0x03, 0xa2, 'r', '1', 0xa2, 'n', '2'},
		want: Message{Version: PreviousVersion, Origin: "n1", Events: []replica.Event{{Kind: replica.KindFree, ReservationID: "r1", BookedBy: "n2"}}},
	}, {
		name: "wide encodings of small values",
		// [uint8 1, str8 "n1", array16 [[uint64 3, str16 "r1"]]]
		b: []byte{0x93, 0xcc, 0x01, 0xd9, 0x02, 'n', '1', 0xdc, 0x00, 0x01,
			0xdd, 0x00, 0x00, 0x00, 0x02, 0xcf, 0, 0, 0, 0, 0, 0, 0, 0x03, 0xda, 0x00, 0x02, 'r', '1'},
		want: Message{Version: PreviousVersion, Origin: "n1", Events: []replica.Event{{Kind: replica.KindFree, ReservationID: "r1"}}},
	}, {
		name: "signed encodings of non-negative values",
		// [int8 1, "n1", [[int64 2, "r1"]]]
		b:    []byte{0x93, 0xd0, 0x01, 0xa2, 'n', '1', 0x91, 0x92, 0xd3, 0, 0, 0, 0, 0, 0, 0, 0x02, 0xa2, 'r', '1'},
		want: Message{Version: PreviousVersion, Origin: "n1", Events: []replica.Event{{Kind: replica.KindPrefillComplete, ReservationID: "r1"}}},
	}, {
		name: "trailing fields of a newer v1 writer",
		// [1, "n1", [[3, "r1", nil, {"x": [1]}]], "extra", [1, 2]]
		b: []byte{0x95, 0x01, 0xa2, 'n', '1', 0x91, 0x94, 0x03, 0xa2, 'r', '1', 0xc0, 0x81, 0xa1, 'x', 0x91, 0x01,
			0xa5, 'e', 'x', 't', 'r', 'a', 0x92, 0x01, 0x02},
		want: Message{Version: PreviousVersion, Origin: "n1", Events: []replica.Event{{Kind: replica.KindFree, ReservationID: "r1"}}},
	}, {
		name: "v2 free",
		// [2, "n1", bin(5f0c…f5), 12, 300, [[3, "r1", "n2"]]]
		b: append(append([]byte{0x96, 0x02, 0xa2, 'n', '1', 0xc4, 0x10}, wireCluster[:]...),
			0x0c, 0xcd, 0x01, 0x2c, 0x91, 0x93, 0x03, 0xa2, 'r', '1', 0xa2, 'n', '2'),
		want: Message{Version: Version, Origin: "n1", ClusterID: wireCluster, Epoch: 12, Counter: 300,
			Events: []replica.Event{{Kind: replica.KindFree, ReservationID: "r1", BookedBy: "n2", Epoch: 12, Counter: 300}}},
	}, {
		name: "v2 live part",
		// [2, "n1", bin(…), 1, 1, [[4, 3, 2, "a", "", ["b", "c"], [1]]]]
		b: append(append([]byte{0x96, 0x02, 0xa2, 'n', '1', 0xc4, 0x10}, wireCluster[:]...),
			0x01, 0x01, 0x91, 0x97, 0x04, 0x03, 0x02, 0xa1, 'a', 0xa0, 0x92, 0xa1, 'b', 0xa1, 'c', 0x91, 0x01),
		want: wireV2("n1", 1, 1, wireLive(3, 2, "a", "", []string{"b", "c"}, 1)),
	}, {
		name: "v2 want with trailing fields of a newer v2 writer",
		// [2, "n1", bin(…), 2, 5, [[5, "n3", 7, ["r9"], "new"]], "extra"]
		b: append(append([]byte{0x97, 0x02, 0xa2, 'n', '1', 0xc4, 0x10}, wireCluster[:]...),
			0x02, 0x05, 0x91, 0x95, 0x05, 0xa2, 'n', '3', 0x07, 0x91, 0xa2, 'r', '9', 0xa3, 'n', 'e', 'w',
			0xa5, 'e', 'x', 't', 'r', 'a'),
		want: wireV2("n1", 2, 5, wireWant("n3", 7, "r9")),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m Message
			if err := DecodeMessage(tc.b, &m); err != nil {
				t.Fatal(err)
			}
			if d := wireMessagesEqual(&m, &tc.want); d != "" {
				t.Fatal(d)
			}
		})
	}
}

func Test_DecodeMessage_RoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	manyHashes := make([]uint64, api.MaxHashes)
	for i := range manyHashes {
		manyHashes[i] = rng.Uint64()
	}
	manyEvents := make([]replica.Event, MaxEvents)
	for i := range manyEvents {
		manyEvents[i] = replica.Event{Kind: replica.Kind(1 + i%3), ReservationID: fmt.Sprintf("r-%d", i)}
		if manyEvents[i].Kind == replica.KindAdmission {
			manyEvents[i] = wireAdmission(manyEvents[i].ReservationID, uint64(i))
		}
	}
	manyIDs := make([]string, MaxSetIDs)
	for i := range manyIDs {
		manyIDs[i] = fmt.Sprintf("id-%06d", i)
	}
	var tests []struct {
		name string
		msg  Message
	}
	// Every v1 case in both schemas; live and want exist in v2 only.
	for _, tc := range []struct {
		name   string
		origin string
		events []replica.Event
	}{
		{"no events", "n", nil},
		{"admission", "n1", []replica.Event{wireAdmission("r", 1, 2, 3)}},
		{"admission without hashes", "n1", []replica.Event{wireAdmission("r")}},
		{"lifecycle with and without the booking node", "n3", []replica.Event{
			{Kind: replica.KindPrefillComplete, ReservationID: "r", BookedBy: "n1"}, {Kind: replica.KindFree, ReservationID: "r", BookedBy: "n1"},
			{Kind: replica.KindFree, ReservationID: "s"}}},
		{"admission not chained", "n1", []replica.Event{func() replica.Event { e := wireAdmission("r", 9); e.Chained = false; return e }()}},
		{"min admission", "n1", []replica.Event{wireMinAdmission()}},
		{"max admission", strings.Repeat("o", MaxOriginLen), []replica.Event{wireMaxAdmission()}},
		{"prefill complete", "n1", []replica.Event{{Kind: replica.KindPrefillComplete, ReservationID: "r"}}},
		{"free", "n1", []replica.Event{{Kind: replica.KindFree, ReservationID: "r"}}},
		{"max hashes", "n1", []replica.Event{wireAdmission("r", manyHashes...)}},
		{"max events", "n1", manyEvents},
	} {
		tests = append(tests, struct {
			name string
			msg  Message
		}{"v1 " + tc.name, wireV1(tc.origin, tc.events...)}, struct {
			name string
			msg  Message
		}{"v2 " + tc.name, wireV2(tc.origin, 3, 9, tc.events...)})
	}
	for _, tc := range []struct {
		name string
		msg  Message
	}{
		{"v2 empty live set", wireV2("n1", 1, 1, wireLive(1, 0, "", "", nil))},
		{"v2 live parts", wireV2("n1", 1, 2, wireLive(2, 1, "", "m", []string{"a", "m"}, 0),
			wireLive(2, 1, "m", "", []string{"n", "z"}, 0, 1))},
		{"v2 max live part", wireV2("n1", 1, 2, wireLive(5, 4, "", "", manyIDs, 0, MaxSetIDs-1))},
		{"v2 max want", wireV2("n1", 1, 2, wireWant("n2", 7, manyIDs...))},
		{"v2 mixed", wireV2("n1", math.MaxUint64, math.MaxUint64, wireAdmission("r", 1), wireWant("n2", 1, "x"),
			wireLive(1, 1, "", "", []string{"r"}), replica.Event{Kind: replica.KindFree, ReservationID: "r"})},
	} {
		tests = append(tests, tc)
	}
	var reused Message // decoded into by every case, to exercise reuse
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidateMessage(&tc.msg); err != nil {
				t.Fatalf("ValidateMessage: %v", err)
			}
			b := AppendMessage(nil, &tc.msg)
			for _, m := range []*Message{new(Message), &reused} {
				if err := DecodeMessage(b, m); err != nil {
					t.Fatal(err)
				}
				if d := wireMessagesEqual(m, &tc.msg); d != "" {
					t.Fatal(d)
				}
				if again := AppendMessage(nil, m); !bytes.Equal(again, b) {
					t.Fatal("re-encoding the decoded message changed its bytes")
				}
			}
			// An independent msgpack decoder reads the same structure.
			var generic []any
			if err := msgpack.Unmarshal(b, &generic); err != nil {
				t.Fatalf("vmihailenco/msgpack cannot read the encoding: %v", err)
			}
			events := 2
			if tc.msg.Version != PreviousVersion {
				events = 5
			}
			if len(generic) != events+1 || generic[1] != tc.msg.Origin || len(generic[events].([]any)) != len(tc.msg.Events) {
				t.Fatalf("vmihailenco/msgpack reads %.200v", generic)
			}
		})
	}
}

// mpArr and mpRaw build msgpack test vectors: mpEncode(mpArr{1, "n1", mpArr{}}).
type (
	mpArr []any
	mpRaw []byte
)

func mpEncode(v any) []byte { return mpAppend(nil, v) }

func mpAppend(dst []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(dst, 0xc0)
	case int:
		return appendInt(dst, int64(v))
	case int64:
		return appendInt(dst, v)
	case uint64:
		return appendUint(dst, v)
	case string:
		return appendStr(dst, v)
	case bool:
		return appendBool(dst, v)
	case []uint64:
		dst = appendArrayLen(dst, len(v))
		for _, x := range v {
			dst = appendUint(dst, x)
		}
		return dst
	case mpArr:
		dst = appendArrayLen(dst, len(v))
		for _, x := range v {
			dst = mpAppend(dst, x)
		}
		return dst
	case mpRaw:
		return append(dst, v...)
	}
	panic(fmt.Sprintf("appendValue: %T", v))
}

// mpAdmission is a valid admission event as a test vector; with sets
// element i to v (replacing, or truncating when v is cut).
func mpAdmission(with ...any) mpArr {
	a := mpArr{1, "r1", "m", "t", 7, 0, 16, []uint64{1, 2}, true, 10, 5, int64(1_700_000_000_000_000_000)}
	for i := 0; i+1 < len(with); i += 2 {
		idx := with[i].(int)
		if with[i+1] == mpCut {
			a = a[:idx]
			continue
		}
		a[idx] = with[i+1]
	}
	return a
}

// hashCountWithoutHashes is an admission that claims api.MaxHashes
// hashes and ends there.
func mpHashCountWithoutHashes() []byte {
	b := mpMessage(mpAdmission(7, mpRaw{0xdd, 0x00, 0x10, 0x00, 0x00}, 8, mpCut))
	b[bytes.IndexByte(b, 0x98)] = 0x9c // the event's header: 12 elements, not 8
	return b
}

type mpCutMarker struct{}

var mpCut = mpCutMarker{}

func mpMessage(events ...mpArr) []byte {
	ev := make(mpArr, len(events))
	for i, e := range events {
		ev[i] = e
	}
	return mpEncode(mpArr{1, "n1", ev})
}

func Test_DecodeMessage_Rejects(t *testing.T) {
	freeEvents := func(n int) mpArr {
		ev := make(mpArr, n)
		for i := range ev {
			ev[i] = mpArr{3, "r"}
		}
		return ev
	}
	zeros := make([]uint64, api.MaxHashes+1)
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"version 0", mpEncode(mpArr{0, "n1", mpArr{}}), ErrUnknownVersion},
		{"version 3", mpEncode(mpArr{3, "n1", mpArr{}}), ErrUnknownVersion},
		{"version 3 of another shape", mpEncode(mpArr{3}), ErrUnknownVersion},
		{"huge version", mpEncode(mpArr{uint64(1) << 40, "n1", mpArr{}}), ErrUnknownVersion},
		{"negative version", mpEncode(mpArr{-1, "n1", mpArr{}}), ErrMalformed},
		{"version not an integer", mpEncode(mpArr{"1", "n1", mpArr{}}), ErrMalformed},
		{"empty input", nil, ErrMalformed},
		{"not an array", mpEncode("hello"), ErrMalformed},
		{"map", mpRaw{0x80}, ErrMalformed},
		{"empty array", mpEncode(mpArr{}), ErrMalformed},
		{"no events array", mpEncode(mpArr{1, "n1"}), ErrMalformed},
		{"empty origin", mpEncode(mpArr{1, "", mpArr{}}), ErrMalformed},
		{"origin too long", mpEncode(mpArr{1, strings.Repeat("o", MaxOriginLen+1), mpArr{}}), ErrMalformed},
		{"origin not a string", mpEncode(mpArr{1, mpRaw{0xc4, 0x01, 'n'}, mpArr{}}), ErrMalformed},
		{"events not an array", mpEncode(mpArr{1, "n1", "events"}), ErrMalformed},
		{"too many events", mpEncode(mpArr{1, "n1", freeEvents(MaxEvents + 1)}), ErrMalformed},
		{"event count past the frame", mpEncode(mpArr{1, "n1", mpRaw{0xdd, 0xff, 0xff, 0xff, 0xff}}), ErrMalformed},
		{"more events than 4 bytes each", mpEncode(mpArr{1, "n1", mpRaw{0x9f}, slices.Repeat(mpRaw{0xc0}, 15)}), ErrMalformed},
		{"bytes after the message", append(mpMessage(mpArr{3, "r1"}), 0x00), ErrMalformed},
		{"event not an array", mpEncode(mpArr{1, "n1", mpArr{"x"}}), ErrMalformed},
		{"event of one element", mpMessage(mpArr{3}), ErrMalformed},
		{"kind 0", mpMessage(mpArr{0, "r1"}), ErrMalformed},
		{"kind 4 (live) in v1", mpMessage(mpArr{4, 1, 0, "", "", mpArr{}, mpArr{}}), ErrMalformed},
		{"kind 5 (want) in v1", mpMessage(mpArr{5, "n2", 1, mpArr{"r1"}}), ErrMalformed},
		{"kind 6", mpMessage(mpArr{6, "r1"}), ErrMalformed},
		{"kind 257 (1 mod 256)", mpMessage(mpAdmission(0, 257)), ErrMalformed},
		{"negative kind", mpMessage(mpArr{-3, "r1"}), ErrMalformed},
		{"empty id", mpMessage(mpArr{3, ""}), ErrMalformed},
		{"id with a slash", mpMessage(mpArr{3, "a/b"}), ErrMalformed},
		{"id with a space", mpMessage(mpArr{2, "a b"}), ErrMalformed},
		{"id not ASCII", mpMessage(mpArr{3, "r\xc3\xa9"}), ErrMalformed},
		{"id too long", mpMessage(mpArr{3, strings.Repeat("r", api.MaxIDLen+1)}), ErrMalformed},
		{"id not a string", mpMessage(mpArr{3, 5}), ErrMalformed},
		{"admission of 11 elements", mpMessage(mpAdmission(11, mpCut)), ErrMalformed},
		{"admission of 2 elements", mpMessage(mpAdmission(2, mpCut)), ErrMalformed},
		{"model too long", mpMessage(mpAdmission(2, strings.Repeat("m", api.MaxNameLen+1))), ErrMalformed},
		{"tenant too long", mpMessage(mpAdmission(3, strings.Repeat("t", api.MaxNameLen+1))), ErrMalformed},
		{"model nil", mpMessage(mpAdmission(2, nil)), ErrMalformed},
		{"negative worker", mpMessage(mpAdmission(4, -1)), ErrMalformed},
		{"rank past uint32", mpMessage(mpAdmission(5, uint64(1)<<32)), ErrMalformed},
		{"negative rank", mpMessage(mpAdmission(5, -1)), ErrMalformed},
		{"block size 0", mpMessage(mpAdmission(6, 0)), ErrMalformed},
		{"block size past uint32", mpMessage(mpAdmission(6, uint64(1)<<32)), ErrMalformed},
		{"hashes not an array", mpMessage(mpAdmission(7, "h")), ErrMalformed},
		{"too many hashes", mpMessage(mpAdmission(7, zeros)), ErrMalformed},
		{"hash count past the frame", mpHashCountWithoutHashes(), ErrMalformed},
		{"negative hash", mpMessage(mpAdmission(7, mpArr{1, -1})), ErrMalformed},
		{"float hash", mpMessage(mpAdmission(7, mpArr{mpRaw{0xcb, 0, 0, 0, 0, 0, 0, 0, 0}})), ErrMalformed},
		{"chained not a bool", mpMessage(mpAdmission(8, 1)), ErrMalformed},
		{"isl 0", mpMessage(mpAdmission(9, 0, 10, 0)), ErrMalformed},
		{"negative isl", mpMessage(mpAdmission(9, -1, 10, 0)), ErrMalformed},
		{"isl past 2^32", mpMessage(mpAdmission(9, int64(api.MaxISLTokens)+1)), ErrMalformed},
		{"isl past int64", mpMessage(mpAdmission(9, uint64(math.MaxUint64))), ErrMalformed},
		{"negative prefill", mpMessage(mpAdmission(10, -1)), ErrMalformed},
		{"prefill past isl", mpMessage(mpAdmission(10, 11)), ErrMalformed},
		{"admitted 0", mpMessage(mpAdmission(11, 0)), ErrMalformed},
		{"admitted before 1970", mpMessage(mpAdmission(11, int64(math.MinInt64))), ErrMalformed},
		{"admitted past int64", mpMessage(mpAdmission(11, uint64(math.MaxUint64))), ErrMalformed},
		{"bad trailing field", mpEncode(mpArr{1, "n1", mpArr{mpArr{3, "r1", mpRaw{0xc1}}}}), ErrMalformed},
		{"one bad event among good ones", mpMessage(mpAdmission(), mpArr{3, "r1"}, mpArr{3, ""}), ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := Message{Origin: "stale", Events: []replica.Event{wireAdmission("stale", 1)}}
			err := DecodeMessage(tc.b, &m)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			if other := wireOtherSentinel(tc.want); errors.Is(err, other) {
				t.Fatalf("error %v also wraps %v", err, other)
			}
			if m.Origin != "" || len(m.Events) != 0 {
				t.Fatalf("a rejected message left %+v", m)
			}
		})
	}
}

// mpV2 is a v2 message of the test cluster with the given events.
func mpV2(events ...mpArr) []byte {
	ev := make(mpArr, len(events))
	for i, e := range events {
		ev[i] = e
	}
	return mpEncode(mpArr{2, "n1", mpRaw(appendBin(nil, wireCluster[:])), 1, 1, ev})
}

// mpLive is a valid live event as a test vector; with sets element i to
// v, as mpAdmission does.
func mpLive(with ...any) mpArr {
	a := mpArr{4, 3, 2, "a", "m", mpArr{"b", "c"}, mpArr{0, 1}}
	for i := 0; i+1 < len(with); i += 2 {
		if with[i+1] == mpCut {
			a = a[:with[i].(int)]
			continue
		}
		a[with[i].(int)] = with[i+1]
	}
	return a
}

// Test_DecodeMessageV2_Rejects: what a v2 decoder must refuse in the
// header and in the live and want events, beside what v1 refuses.
func Test_DecodeMessageV2_Rejects(t *testing.T) {
	bin := func(b []byte) mpRaw { return mpRaw(appendBin(nil, b)) }
	id := bin(wireCluster[:])
	manyIDs := make(mpArr, MaxSetIDs+1)
	for i := range manyIDs {
		manyIDs[i] = fmt.Sprintf("id-%06d", i)
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"v2 of 5 elements", mpEncode(mpArr{2, "n1", id, 1, 1})},
		{"v2 of 3 elements (a v1 shape)", mpEncode(mpArr{2, "n1", mpArr{}})},
		{"cluster id a string", mpEncode(mpArr{2, "n1", string(wireCluster[:]), 1, 1, mpArr{}})},
		{"cluster id of 15 bytes", mpEncode(mpArr{2, "n1", bin(wireCluster[:15]), 1, 1, mpArr{}})},
		{"cluster id of 17 bytes", mpEncode(mpArr{2, "n1", bin(append(wireCluster[:], 0)), 1, 1, mpArr{}})},
		{"zero cluster id", mpEncode(mpArr{2, "n1", bin(make([]byte, 16)), 1, 1, mpArr{}})},
		{"cluster id nil", mpEncode(mpArr{2, "n1", nil, 1, 1, mpArr{}})},
		{"epoch 0", mpEncode(mpArr{2, "n1", id, 0, 1, mpArr{}})},
		{"counter 0", mpEncode(mpArr{2, "n1", id, 1, 0, mpArr{}})},
		{"negative epoch", mpEncode(mpArr{2, "n1", id, -1, 1, mpArr{}})},
		{"counter not an integer", mpEncode(mpArr{2, "n1", id, 1, "1", mpArr{}})},
		{"bin length past the frame", mpEncode(mpArr{2, "n1", mpRaw{0xc4, 0xff}})},
		{"v1 event invalid in v2 too", mpV2(mpArr{3, "a/b"})},
		{"kind 6", mpV2(mpArr{6, "r1"})},
		{"live of 6 elements", mpV2(mpLive(6, mpCut))},
		{"live set 0", mpV2(mpLive(1, 0))},
		{"live as_of negative", mpV2(mpLive(2, -1))},
		{"live after not a string", mpV2(mpLive(3, 1))},
		{"live after not an id", mpV2(mpLive(3, "a b"))},
		{"live through not an id", mpV2(mpLive(4, "m/n"))},
		{"live bounds empty", mpV2(mpLive(3, "m", 4, "m"))},
		{"live bounds reversed", mpV2(mpLive(3, "z", 4, "m"))},
		{"live ids not an array", mpV2(mpLive(5, "b"))},
		{"live id empty", mpV2(mpLive(5, mpArr{""}, 6, mpArr{}))},
		{"live id not an id", mpV2(mpLive(5, mpArr{"b%"}, 6, mpArr{}))},
		{"live ids unsorted", mpV2(mpLive(5, mpArr{"c", "b"}))},
		{"live ids repeated", mpV2(mpLive(5, mpArr{"b", "b"}))},
		{"live id at after", mpV2(mpLive(5, mpArr{"a", "b"}))},
		{"live id past through", mpV2(mpLive(5, mpArr{"b", "n"}))},
		{"too many live ids", mpV2(mpLive(3, "", 4, "", 5, manyIDs, 6, mpArr{}))},
		{"live id count past the frame", mpV2(mpLive(5, mpRaw{0xdd, 0x00, 0x00, 0x10, 0x00}, 6, mpCut))},
		{"more prefilling than ids", mpV2(mpLive(6, mpArr{0, 1, 2}))},
		{"prefilling index past the ids", mpV2(mpLive(6, mpArr{2}))},
		{"prefilling unsorted", mpV2(mpLive(6, mpArr{1, 0}))},
		{"prefilling repeated", mpV2(mpLive(6, mpArr{1, 1}))},
		{"prefilling negative", mpV2(mpLive(6, mpArr{-1}))},
		{"prefilling not an array", mpV2(mpLive(6, 1))},
		{"want of 3 elements", mpV2(mpArr{5, "n2", 1})},
		{"want target empty", mpV2(mpArr{5, "", 1, mpArr{"r1"}})},
		{"want target too long", mpV2(mpArr{5, strings.Repeat("t", MaxOriginLen+1), 1, mpArr{"r1"}})},
		{"want epoch 0", mpV2(mpArr{5, "n2", 0, mpArr{"r1"}})},
		{"want without ids", mpV2(mpArr{5, "n2", 1, mpArr{}})},
		{"want id not an id", mpV2(mpArr{5, "n2", 1, mpArr{"r?"}})},
		{"too many want ids", mpV2(mpArr{5, "n2", 1, manyIDs})},
		{"bad trailing field of a live event", mpV2(append(mpLive(), mpRaw{0xc1}))},
		{"one bad event among good ones", mpV2(mpLive(), mpArr{5, "n2", 1, mpArr{"r1"}}, mpArr{5, "n2", 0, mpArr{"r1"}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := wireV2("stale", 1, 1, wireLive(1, 1, "", "", []string{"x"}))
			err := DecodeMessage(tc.b, &m)
			if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("error %v, want ErrMalformed alone", err)
			}
			if m.Origin != "" || len(m.Events) != 0 || m.Version != 0 || m.Epoch != 0 || m.Counter != 0 || !m.ClusterID.IsZero() {
				t.Fatalf("a rejected message left %+v", m)
			}
		})
	}
	// The valid vectors the cases above are cut from decode.
	var m Message
	for _, b := range [][]byte{mpV2(mpLive()), mpV2(mpArr{5, "n2", 1, mpArr{"r1"}}), mpV2(mpLive(3, "", 4, ""))} {
		if err := DecodeMessage(b, &m); err != nil {
			t.Fatalf("a valid vector: %v", err)
		}
	}
}

func wireOtherSentinel(err error) error {
	if err == ErrMalformed {
		return ErrUnknownVersion
	}
	return ErrMalformed
}

func Test_DecodeMessage_ErrorsWrapCauses(t *testing.T) {
	var m Message
	if err := DecodeMessage(mpMessage(mpArr{3, "a/b"}), &m); !errors.Is(err, api.ErrBadID) {
		t.Errorf("bad id: %v does not wrap api.ErrBadID", err)
	}
	if err := DecodeMessage(mpMessage(mpArr{3, 5}), &m); !errors.Is(err, msgpackx.ErrMalformed) {
		t.Errorf("wrong type: %v does not wrap msgpackx.ErrMalformed", err)
	}
}

// Every value ValidateMessage refuses, DecodeMessage refuses too, and for
// the same reason, so a publisher that validates never sends what
// receivers drop.
func Test_ValidateMessage_AgreesWithDecode(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m *Message)
	}{
		{"empty origin", func(m *Message) { m.Origin = "" }},
		{"origin too long", func(m *Message) { m.Origin = strings.Repeat("o", MaxOriginLen+1) }},
		{"too many events", func(m *Message) {
			m.Events = slices.Repeat([]replica.Event{{Kind: replica.KindFree, ReservationID: "r"}}, MaxEvents+1)
		}},
		{"kind 0", func(m *Message) { m.Events[0] = replica.Event{ReservationID: "r"} }},
		{"kind 6", func(m *Message) { m.Events[0] = replica.Event{Kind: 6, ReservationID: "r"} }},
		{"live in v1", func(m *Message) { m.Version, m.Events[0] = PreviousVersion, wireLive(1, 1, "", "", nil) }},
		{"want in v1", func(m *Message) { m.Version, m.Events[0] = PreviousVersion, wireWant("n2", 1, "r") }},
		{"zero cluster id", func(m *Message) { m.ClusterID = ClusterID{} }},
		{"epoch 0", func(m *Message) { m.Epoch = 0 }},
		{"counter 0", func(m *Message) { m.Counter = 0 }},
		{"live without a part", func(m *Message) { m.Events[0] = replica.Event{Kind: replica.KindLive} }},
		{"live set 0", func(m *Message) { m.Events[0] = wireLive(0, 1, "", "", nil) }},
		{"live bounds reversed", func(m *Message) { m.Events[0] = wireLive(1, 1, "z", "a", nil) }},
		{"live bound not an id", func(m *Message) { m.Events[0] = wireLive(1, 1, "a b", "", nil) }},
		{"live ids unsorted", func(m *Message) { m.Events[0] = wireLive(1, 1, "", "", []string{"b", "a"}) }},
		{"live id outside the bounds", func(m *Message) { m.Events[0] = wireLive(1, 1, "c", "", []string{"b"}) }},
		{"live id not an id", func(m *Message) { m.Events[0] = wireLive(1, 1, "", "", []string{"a/"}) }},
		{"too many live ids", func(m *Message) {
			ids := make([]string, MaxSetIDs+1)
			for i := range ids {
				ids[i] = fmt.Sprintf("%06d", i)
			}
			m.Events[0] = wireLive(1, 1, "", "", ids)
		}},
		{"prefilling past the ids", func(m *Message) { m.Events[0] = wireLive(1, 1, "", "", []string{"a"}, 1) }},
		{"prefilling repeated", func(m *Message) { m.Events[0] = wireLive(1, 1, "", "", []string{"a", "b"}, 0, 0) }},
		{"want without a target", func(m *Message) { m.Events[0] = wireWant("", 1, "r") }},
		{"want of epoch 0", func(m *Message) { m.Events[0] = wireWant("n2", 0, "r") }},
		{"want without ids", func(m *Message) { m.Events[0] = wireWant("n2", 1) }},
		{"want id not an id", func(m *Message) { m.Events[0] = wireWant("n2", 1, "") }},
		{"empty id", func(m *Message) { m.Events[1].ReservationID = "" }},
		{"id with a percent", func(m *Message) { m.Events[0].ReservationID = "50%" }},
		{"id too long", func(m *Message) { m.Events[0].ReservationID = strings.Repeat("r", api.MaxIDLen+1) }},
		{"model too long", func(m *Message) { m.Events[0].Model = strings.Repeat("m", api.MaxNameLen+1) }},
		{"tenant too long", func(m *Message) { m.Events[0].Tenant = strings.Repeat("t", api.MaxNameLen+1) }},
		{"block size 0", func(m *Message) { m.Events[0].BlockSize = 0 }},
		{"too many hashes", func(m *Message) { m.Events[0].SequenceHashes = make([]uint64, api.MaxHashes+1) }},
		{"isl 0", func(m *Message) { m.Events[0].ISL, m.Events[0].PrefillTokens = 0, 0 }},
		{"negative isl", func(m *Message) { m.Events[0].ISL, m.Events[0].PrefillTokens = -5, 0 }},
		{"isl past 2^32", func(m *Message) { m.Events[0].ISL = api.MaxISLTokens + 1 }},
		{"negative prefill", func(m *Message) { m.Events[0].PrefillTokens = -1 }},
		{"prefill past isl", func(m *Message) { m.Events[0].PrefillTokens = m.Events[0].ISL + 1 }},
		{"zero admission time", func(m *Message) { m.Events[0].Admitted = time.Time{} }},
		{"admitted at the epoch", func(m *Message) { m.Events[0].Admitted = time.Unix(0, 0) }},
		{"admitted before 1970", func(m *Message) { m.Events[0].Admitted = time.Date(1969, 7, 20, 0, 0, 0, 0, time.UTC) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := wireV2("n1", 1, 1, wireAdmission("r1", 1, 2), replica.Event{Kind: replica.KindFree, ReservationID: "r2"})
			tc.mutate(&m)
			if err := ValidateMessage(&m); !errors.Is(err, ErrMalformed) {
				t.Errorf("ValidateMessage: %v, want ErrMalformed", err)
			}
			var got Message
			if err := DecodeMessage(AppendMessage(nil, &m), &got); !errors.Is(err, ErrMalformed) {
				t.Errorf("DecodeMessage: %v, want ErrMalformed", err)
			}
		})
	}
}

func Test_DecodeMessage_Truncated(t *testing.T) {
	for _, tc := range wireGoldenMessages() {
		t.Run(tc.name, func(t *testing.T) {
			b := AppendMessage(nil, &tc.msg)
			var m Message
			for i := range len(b) {
				// A copy of exactly i bytes, so that reading past it is
				// caught by the race detector's and the runtime's bounds.
				prefix := bytes.Clone(b[:i])
				if err := DecodeMessage(prefix, &m); !errors.Is(err, ErrMalformed) {
					t.Fatalf("prefix of %d/%d bytes: %v, want ErrMalformed", i, len(b), err)
				}
			}
		})
	}
}

func Test_AppendMessage_NoAllocs(t *testing.T) {
	m := wireBenchMessage(64, 128)
	buf := AppendMessage(nil, &m)
	if n := testing.AllocsPerRun(100, func() { buf = AppendMessage(buf[:0], &m) }); n != 0 {
		t.Fatalf("AppendMessage into a large enough buffer: %v allocations, want 0", n)
	}
}

// Decoding into a reused Message allocates only the reservation ids:
// hash slices, the event slice, the origin and repeated model and tenant
// names are reused.
func Test_DecodeMessage_Reuse(t *testing.T) {
	m := wireBenchMessage(64, 128)
	b := AppendMessage(nil, &m)
	var out Message
	if err := DecodeMessage(b, &out); err != nil {
		t.Fatal(err)
	}
	n := testing.AllocsPerRun(100, func() {
		if err := DecodeMessage(b, &out); err != nil {
			t.Fatal(err)
		}
	})
	if n > float64(len(m.Events)) {
		t.Fatalf("%v allocations per decode of %d events, want at most one per reservation id", n, len(m.Events))
	}
}

// The decoder never allocates more than a small multiple of its input,
// whatever counts the input claims.
func Test_DecodeMessage_AllocationBoundedByInput(t *testing.T) {
	tests := []struct {
		name   string
		b      []byte
		events int
	}{
		{"hash count without hashes", mpHashCountWithoutHashes(), 1},
		{"event count without events", mpEncode(mpArr{1, "n1", mpRaw{0xdd, 0x00, 0x00, 0x10, 0x00}}), 0},
		{"max one-byte hashes", mpMessage(mpAdmission(7, make([]uint64, api.MaxHashes))), 1},
		{"max shortest events", mpEncode(mpArr{1, "n1", slices.Repeat(mpArr{mpArr{3, "r"}}, MaxEvents)}), MaxEvents},
		{"live id count without ids", mpV2(mpLive(5, mpRaw{0xdd, 0x00, 0x00, 0x10, 0x00}, 6, mpCut)), 1},
		{"want id count without ids", mpV2(mpArr{5, "n2", 1, mpRaw{0xdd, 0x00, 0x00, 0x10, 0x00}}), 1},
		{"max one-byte live ids", mpV2(mpLive(3, "", 4, "", 5, mpRaw(appendStrs(nil, wireShortIDs(MaxSetIDs))), 6, mpArr{})), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			limit := uint64(16*len(tc.b) + tc.events*int(unsafe.Sizeof(replica.Event{})) + 64<<10)
			var before, after runtime.MemStats
			var m Message
			runtime.ReadMemStats(&before)
			_ = DecodeMessage(tc.b, &m)
			runtime.ReadMemStats(&after)
			if got := after.TotalAlloc - before.TotalAlloc; got > limit {
				t.Fatalf("decoding %d bytes allocated %d bytes, limit %d", len(tc.b), got, limit)
			}
		})
	}
}

// wireShortIDs are n distinct ids of one to three bytes, ascending.
func wireShortIDs(n int) []string {
	ids := make([]string, 0, n)
	for i := 0; len(ids) < n; i++ {
		ids = append(ids, fmt.Sprintf("%x", i))
	}
	slices.Sort(ids)
	return ids
}

// wireFuzzSeeds are written to testdata/fuzz/FuzzDecodeMessage by -update.
func wireFuzzSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	for _, tc := range wireGoldenMessages() {
		if tc.name != "mixed" { // its kilobytes of names make minimizing slow
			seeds[strings.TrimSuffix(filepath.Base(goldenPath(tc.name, &tc.msg)), ".bin")] = AppendMessage(nil, &tc.msg)
		}
	}
	live := seeds["v2-live"]
	seeds["v2-truncated-live"] = live[:len(live)-2]
	seeds["v2-trailing-fields"] = mpEncode(mpArr{2, "n1", mpRaw(appendBin(nil, wireCluster[:])), 4, 9,
		mpArr{append(mpLive(), "new"), append(mpAdmission(), mpArr{1}), mpArr{5, "n2", 1, mpArr{"r1"}, nil}}, mpRaw{0x80}})
	seeds["v2-live-unsorted"] = mpV2(mpLive(5, mpArr{"c", "b"}))
	seeds["v2-zero-counter"] = mpEncode(mpArr{2, "n1", mpRaw(appendBin(nil, wireCluster[:])), 1, 0, mpArr{}})
	seeds["v2-v1-shape"] = mpEncode(mpArr{2, "n1", mpArr{mpArr{3, "r1"}}})
	seeds["v3"] = mpEncode(mpArr{3, "n1", mpArr{mpArr{3, "r1"}}})
	short := wireMaxAdmission()
	short.ReservationID, short.Model, short.Tenant = "max", "m", "t"
	mixed := wireV1("n1", wireAdmission("r1", 42), wireMinAdmission(), short,
		replica.Event{Kind: replica.KindPrefillComplete, ReservationID: "r1"}, replica.Event{Kind: replica.KindFree, ReservationID: "r1"})
	seeds["v1-mixed-short"] = AppendMessage(nil, &mixed)
	adm := seeds["v1-admission"]
	seeds["v1-truncated-admission"] = adm[:len(adm)-3]
	seeds["v1-trailing-fields"] = mpEncode(mpArr{1, "n1", mpArr{append(mpAdmission(), "new", mpArr{1}), mpArr{3, "r2", nil}}, mpRaw{0x80}})
	seeds["v1-bad-id"] = mpMessage(mpArr{3, "a/b"})
	seeds["v1-unknown-kind"] = mpMessage(mpArr{9, "r1"})
	return seeds
}

func Test_FuzzSeedCorpus(t *testing.T) {
	decode := map[string][][]byte{}
	for name, b := range wireFuzzSeeds() {
		decode[name] = [][]byte{b}
	}
	checkFuzzSeeds(t, "FuzzDecodeMessage", decode)
	checkFuzzSeeds(t, "FuzzOpenMessage", openFuzzSeeds())
}

// checkFuzzSeeds checks (with -update, writes) the seed corpus of one fuzz
// target whose arguments are all []byte.
func checkFuzzSeeds(t *testing.T, target string, seeds map[string][][]byte) {
	dir := filepath.Join("testdata", "fuzz", target)
	for name, args := range seeds {
		want := "go test fuzz v1\n"
		for _, b := range args {
			want += fmt.Sprintf("[]byte(%q)\n", b)
		}
		path := filepath.Join(dir, name)
		if *updateGolden {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Errorf("seed %s is missing or stale (run go test -update): %v", path, err)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	for _, b := range wireFuzzSeeds() {
		f.Add(b)
	}
	var reused Message
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Message
		err := DecodeMessage(b, &m)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownVersion) {
				t.Fatalf("error %v wraps neither sentinel", err)
			}
			if m.Origin != "" || len(m.Events) != 0 {
				t.Fatalf("a rejected message left %+v", m)
			}
			return
		}
		if err := ValidateMessage(&m); err != nil {
			t.Fatalf("decoded a message ValidateMessage rejects: %v", err)
		}
		enc := AppendMessage(nil, &m)
		var m2 Message
		if err := DecodeMessage(enc, &m2); err != nil {
			t.Fatalf("re-encoded message does not decode: %v", err)
		}
		if d := wireMessagesEqual(&m2, &m); d != "" {
			t.Fatalf("decode→encode→decode: %s", d)
		}
		if enc2 := AppendMessage(nil, &m2); !bytes.Equal(enc2, enc) {
			t.Fatal("encoding is not stable")
		}
		// A Message reused across inputs decodes the same.
		if err := DecodeMessage(b, &reused); err != nil {
			t.Fatalf("decode into a reused message: %v", err)
		}
		if d := wireMessagesEqual(&reused, &m); d != "" {
			t.Fatalf("decode into a reused message: %s", d)
		}
	})
}

func wireBenchMessage(events, hashes int) Message {
	rng := rand.New(rand.NewPCG(3, 4))
	m := wireV2("node-1", 1, 1)
	m.Events = make([]replica.Event, events)
	for i := range m.Events {
		h := make([]uint64, hashes)
		for j := range h {
			h[j] = rng.Uint64()
		}
		m.Events[i] = wireAdmission(fmt.Sprintf("reservation-%06d", i), h...)
	}
	return m
}

func BenchmarkEncodeDecode(b *testing.B) {
	m := wireBenchMessage(64, 128)
	enc := AppendMessage(nil, &m)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		buf := make([]byte, 0, len(enc))
		for b.Loop() {
			buf = AppendMessage(buf[:0], &m)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		var out Message
		for b.Loop() {
			if err := DecodeMessage(enc, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode+decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		var buf []byte
		var out Message
		for b.Loop() {
			buf = AppendMessage(buf[:0], &m)
			if err := DecodeMessage(buf, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
