package scheduler

import (
	"container/list"
	"math"
	"time"
)

// Prefill timing per rank (SPEC §6.2, §6.4): what predicted-ttft ranks by
// and what makes prefill load that is never reported complete decay.
//
// Throughput. A booking records the prefill work ahead of it on its rank
// when it was booked here (the rank's active prefill tokens, decayed)
// plus its own effective prefill tokens. When its prefill_complete comes
// (made here or mirrored, always on this node's clock), work / elapsed is
// a sample of the rank's prefill throughput as the engine delivers it
// under its real mix of prefill and decode; an EWMA of the samples is the
// rank's rate, and until minRateSamples have come the node's default is.
// An engine that is slower, or becomes slower, shows it within a few
// requests, which a cost counted in blocks cannot see.
//
// Decay. The booking's expected prefill end is then work / rate after it
// was booked here, and at least minHold. Until then its tokens count in full; after it they fade
// linearly to zero over its own prefill time (own tokens / rate), so a
// caller that never sends prefill_complete does not pin the rank's prefill
// load for the whole active-request expiry. Both are lazy: a rank's
// prefill count is settled when it is read (prefillAt), in O(bookings that
// start or end fading).

const (
	// minRateSamples is how many samples a rank's learned rate needs
	// before it replaces the default.
	minRateSamples = 5
	// rankAlpha and poolAlpha weigh a new sample in a rank's estimate and
	// in its partition's, which gets every rank's samples.
	rankAlpha = 0.1
	poolAlpha = 0.02
	// sameSpeed is the band, as a ratio either way, within which a rank's
	// own estimate is taken for noise around the partition's.
	sameSpeed = 1.3
	// maxSlowdown caps a sample's elapsed time, as a multiple of what
	// was predicted when it was booked.
	maxSlowdown = 4
	// minFade bounds a fade from below, so a booking whose own prefill
	// is tiny does not drop out in a step.
	minFade = 10 * time.Millisecond
	// minHold is the least time a booking's prefill counts in full. A
	// prediction for a small prefill is dominated by what a rate does not
	// model (the engine's own queueing and step overhead, the caller's
	// network, a test under the race detector), and fading early would
	// undercount a busy rank whose caller reports prefill_complete a
	// little late; a caller that never reports it pins the rank's prefill
	// load for this long instead of the whole active-request expiry.
	minHold = 10 * time.Second
)

// DefaultTokensPerSecond is the prefill throughput a rank is assumed to
// have until it has minRateSamples samples
// (--predicted-ttft-default-tokens-per-s).
const DefaultTokensPerSecond = 20000

// prefill states of a reservation
const (
	prefillOff     = iota // no prefill load (none booked, completed, or unbooked)
	prefillWaiting        // counted in full, in rank.waiting
	prefillFading         // fading, in rank.fading
	prefillFaded          // decayed to zero before its prefill_complete came
)

// prefillClock is a rank's prefill timing; the partition lock guards it.
type prefillClock struct {
	rate rateEstimate
	// waiting holds the bookings counted in full, by fade start; fading
	// those past it.
	waiting, fading list.List
}

// rateEstimate is a throughput learned from (work, elapsed) samples: the
// ratio of their exponentially weighted sums, which big samples dominate
// as they should (a small prefill's time is mostly overhead), rather than
// an average of ratios, which the small ones make noisy.
type rateEstimate struct {
	work, elapsed float64
	samples       int
}

func (r *rateEstimate) add(work, elapsed, alpha float64) {
	if !(work > 0) || !(elapsed > 0) || math.IsInf(work/elapsed, 0) {
		return
	}
	if r.samples == 0 {
		r.work, r.elapsed = work, elapsed
	} else {
		r.work += alpha * (work - r.work)
		r.elapsed += alpha * (elapsed - r.elapsed)
	}
	r.samples++
}

// value is the estimate, or ok false before minRateSamples samples.
func (r *rateEstimate) value() (float64, bool) {
	if r.samples < minRateSamples {
		return 0, false
	}
	return r.work / r.elapsed, true
}

// tokensPerSecond is a rank's prefill throughput: the partition's, learned
// from every rank's samples (the node's default before it has five), times
// the rank's own speed relative to it when that differs by more than
// sameSpeed either way. Pooling keeps the ranks of a uniform fleet on one
// figure, where separate estimates would differ by their noise and send
// work to whichever looks fastest; a rank that really is slower or faster
// (another GPU, a degraded one) stands out of the band within a few
// samples.
func (p *partition) tokensPerSecond(rl *rankLoad) float64 {
	base, ok := p.rate.value()
	if !ok {
		return p.defaultRate
	}
	own, ok := rl.clock.rate.value()
	if !ok {
		return base
	}
	if f := own / base; f > sameSpeed || f < 1/sameSpeed {
		return own
	}
	return base
}

// startPrefill puts a booking's prefill under the rank's clock; rl.prefill
// already counts it in full. Called by book with p.mu held.
func (p *partition) startPrefill(res *reservation) {
	if res.prefill <= 0 || res.prefillDone {
		return
	}
	rl, now := res.rank, res.local
	ahead := rl.prefillAt(now) - res.prefill
	res.work = max(ahead, 0) + res.prefill
	rate := p.tokensPerSecond(rl)
	res.expect = 0 // no prediction to hold a sample to before one is learned
	if _, learned := p.rate.value(); learned {
		res.expect = seconds(float64(res.work) / rate)
	}
	if p.noDecay {
		res.fadeStart, res.fadeEnd = never, never
	} else {
		res.fadeStart = now.Add(max(seconds(float64(res.work)/rate), minHold))
		res.fadeEnd = res.fadeStart.Add(max(seconds(float64(res.prefill)/rate), minFade))
	}
	w := &rl.clock.waiting
	e := w.Back()
	for e != nil && e.Value.(*reservation).fadeStart.After(res.fadeStart) {
		e = e.Prev()
	}
	if e == nil {
		res.prefillElem = w.PushFront(res)
	} else {
		res.prefillElem = w.InsertAfter(res, e)
	}
	res.prefillState = prefillWaiting
}

// stopPrefill takes a booking's prefill off the rank: the tokens it still
// counts and its place in the clock. learn says it ended by
// prefill_complete at now, which is a throughput sample.
func (p *partition) stopPrefill(res *reservation, now time.Time, learn bool) {
	rl := res.rank
	switch res.prefillState {
	case prefillWaiting:
		rl.prefill -= res.prefill
		rl.clock.waiting.Remove(res.prefillElem)
	case prefillFading:
		rl.clock.fading.Remove(res.prefillElem)
	}
	res.prefillElem, res.prefillState = nil, prefillOff
	if learn && res.work > 0 {
		// One completion reported late (a caller that sends it at the
		// end, a completion resent by anti-entropy) would otherwise
		// weigh like many: the ratio of sums is dominated by long
		// elapsed times. Clipped at maxSlowdown times the prediction, a
		// really slower engine still pulls its estimate down by that
		// much per sample.
		d := now.Sub(res.local)
		if res.expect > 0 {
			d = min(d, maxSlowdown*max(res.expect, minFade))
		}
		if d > 0 {
			rl.clock.rate.add(float64(res.work), d.Seconds(), rankAlpha)
			p.rate.add(float64(res.work), d.Seconds(), poolAlpha)
		}
	}
}

// prefillAt is the rank's active prefill tokens at now: those counted in
// full plus what fading ones still weigh.
func (rl *rankLoad) prefillAt(now time.Time) int64 {
	c := &rl.clock
	for e := c.waiting.Front(); e != nil; e = c.waiting.Front() {
		res := e.Value.(*reservation)
		if res.fadeStart.After(now) {
			break
		}
		c.waiting.Remove(e)
		rl.prefill -= res.prefill
		res.prefillElem, res.prefillState = c.fading.PushBack(res), prefillFading
	}
	fading := 0.0
	for e := c.fading.Front(); e != nil; {
		next := e.Next()
		res := e.Value.(*reservation)
		if left := res.fadeEnd.Sub(now); left > 0 {
			fading += float64(res.prefill) * float64(left) / float64(res.fadeEnd.Sub(res.fadeStart))
		} else {
			c.fading.Remove(e)
			res.prefillElem, res.prefillState = nil, prefillFaded
		}
		e = next
	}
	return rl.prefill + int64(math.Round(fading))
}

// never is a fade start that never comes (Config.NoPrefillDecay).
var never = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

func seconds(s float64) time.Duration {
	const maxWait = 24 * time.Hour
	if s >= maxWait.Seconds() || math.IsNaN(s) {
		return maxWait
	}
	return time.Duration(s * float64(time.Second))
}
