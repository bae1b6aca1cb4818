package scheduler

import (
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/kvselect/kvselect/fsm"
	"github.com/kvselect/kvselect/scheduler/replica"
)

// checkClock verifies every rank's prefill clock against its reservations.
func checkClock(t *testing.T, f *fixture, step int, op string) {
	t.Helper()
	for _, p := range f.s.parts {
		p.mu.Lock()
		for _, rl := range p.byKey {
			var want int64
			inW, inF := map[*reservation]bool{}, map[*reservation]bool{}
			for e := rl.clock.waiting.Front(); e != nil; e = e.Next() {
				inW[e.Value.(*reservation)] = true
			}
			for e := rl.clock.fading.Front(); e != nil; e = e.Next() {
				inF[e.Value.(*reservation)] = true
			}
			n := 0
			for _, r := range p.reservations {
				if r.rank != rl {
					continue
				}
				switch r.prefillState {
				case prefillWaiting:
					want += r.prefill
					n++
					if !inW[r] {
						t.Fatalf("step %d %s: %s waiting but not listed", step, op, r.id)
					}
				case prefillFading:
					n++
					if !inF[r] {
						t.Fatalf("step %d %s: %s fading but not listed", step, op, r.id)
					}
				}
				if r.prefillDone && r.prefillState != prefillOff {
					t.Fatalf("step %d %s: %s done but state %d", step, op, r.id, r.prefillState)
				}
			}
			if n != len(inW)+len(inF) {
				t.Fatalf("step %d %s: rank %v lists %d+%d, reservations in clock %d", step, op, rl.key, len(inW), len(inF), n)
			}
			if rl.prefill != want || rl.prefill < 0 {
				t.Fatalf("step %d %s: rank %v prefill %d, want %d", step, op, rl.key, rl.prefill, want)
			}
		}
		p.mu.Unlock()
	}
}

func Test_PrefillClockInvariants(t *testing.T) {
	for seed := range uint64(30) {
		rng := mrand.New(mrand.NewPCG(seed, 7))
		f := newFixture(t, func(c *Config) { c.ActiveRequestExpiry = 120 * time.Second })
		f.worker(1, 2)
		f.worker(2, 1)
		var ids []string
		next := 0
		for step := range 600 {
			var op string
			switch k := rng.IntN(10); k {
			case 0, 1:
				op = "reserve"
				id := fmt.Sprint("r", next)
				next++
				w := uint64(1 + rng.IntN(2))
				blocks := 1 + rng.IntN(200)
				ep := int64(rng.IntN(16*blocks + 1))
				if _, err := f.s.Reserve(ReserveRequest{ID: id, Partition: keyM, WorkerID: w, Prompt: prompt(seqRange(uint64(next)<<20, blocks)...), EffectivePrefill: &ep}); err == nil {
					ids = append(ids, id)
				}
			case 2:
				op = "select"
				id := fmt.Sprint("s", next)
				next++
				if _, err := f.s.Select(SelectRequest{Partition: keyM, Prompt: prompt(seqRange(uint64(next)<<20, 1+rng.IntN(200))...), Reserve: true, ReservationID: id,
					Override: usePolicy([]string{"dynamo-default", "predicted-ttft"}[rng.IntN(2)])}); err == nil {
					ids = append(ids, id)
				}
			case 3:
				op = "mirror"
				id := fmt.Sprint("m", next)
				next++
				blocks := 1 + rng.IntN(100)
				ev := replica.Event{Kind: replica.KindAdmission, ReservationID: id, Model: "m", Tenant: "default",
					WorkerID: uint64(1 + rng.IntN(2)), BlockSize: 16, SequenceHashes: seqRange(uint64(next)<<20, blocks), ISL: int64(16 * blocks),
					PrefillTokens: int64(rng.IntN(16*blocks + 1)), Admitted: f.clock.Add(-time.Duration(rng.IntN(60)) * time.Second)}
				if f.s.ApplyPeerEvent("n2", &ev) == "" {
					ids = append(ids, id)
				}
			case 4:
				op = "prefill_complete"
				if len(ids) > 0 {
					f.s.PrefillComplete(ids[rng.IntN(len(ids))])
				}
			case 5:
				op = "free"
				if len(ids) > 0 {
					f.s.Free(ids[rng.IntN(len(ids))])
				}
			case 6:
				op = "peer prefill_complete"
				if len(ids) > 0 {
					f.s.ApplyPeerEvent("n2", &replica.Event{Kind: replica.KindPrefillComplete, ReservationID: ids[rng.IntN(len(ids))]})
				}
			case 7:
				op = "advance"
				f.clock = f.clock.Add(time.Duration(rng.IntN(20000)) * time.Millisecond)
				f.s.Loads("", "")
			case 8:
				op = "sweep"
				f.s.SweepExpired()
			case 9:
				op = "catalog"
				if rng.IntN(8) == 0 {
					f.apply(fsm.DeleteWorker{WorkerID: 2})
					f.worker(2, 1)
				} else if rng.IntN(4) == 0 {
					f.worker(1, 1+rng.IntN(2)) // shrink or grow dp size: drops rank 1
				}
			}
			checkClock(t, f, step, op)
		}
		for _, id := range ids {
			f.s.Free(id)
		}
		f.clock = f.clock.Add(time.Hour)
		f.s.SweepExpired()
		checkClock(t, f, -1, "end")
		for _, pl := range f.s.Loads("", "") {
			for _, l := range pl.Loads {
				if l.ActivePrefillTokens != 0 || l.ActiveRequests != 0 || l.ActiveDecodeBlocks != 0 {
					t.Fatalf("seed %d: left over %+v", seed, l)
				}
			}
		}
	}
}
