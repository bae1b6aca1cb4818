package server

import (
	"context"
	"time"

	"github.com/kvselect/kvselect/fsm"
)

// InitialThresholds are the busy thresholds of the command line
// (--active-decode-blocks-threshold, --active-prefill-tokens-threshold):
// each model the catalog gets receives them once, unless an operator set
// or cleared its thresholds first. nil fields are not set.
type InitialThresholds struct {
	ActiveDecodeBlocks  *float64
	ActivePrefillTokens *uint64
}

func (t InitialThresholds) set() bool {
	return t.ActiveDecodeBlocks != nil || t.ActivePrefillTokens != nil
}

// initThresholdsEvery is how often the leader looks for models without
// thresholds when nothing kicked it (a backstop for a missed kick, or a
// leadership gained without a catalog change).
const initThresholdsEvery = time.Second

// runInitialThresholds writes InitThresholds for every model of the
// catalog that has no threshold record, while this node leads. Catalog
// changes kick it, so a new model gets its thresholds one Raft round trip
// after its first worker. Every node may run it: the FSM applies an
// InitThresholds only to a model without a record, so a stale or
// duplicate one changes nothing.
func (s *Server) runInitialThresholds() {
	defer s.wg.Done()
	tick := time.NewTicker(initThresholdsEvery)
	defer tick.Stop()
	base, cancelBase := s.untilStop()
	defer cancelBase()
	for {
		select {
		case <-s.stop:
			return
		case <-s.thresholdsKick:
		case <-tick.C:
		}
		if !s.Node.IsLeader() {
			continue
		}
		cat := s.Node.Catalog()
		for _, m := range cat.Models() {
			if _, ok := cat.Thresholds(m); ok {
				continue
			}
			ctx, cancel := context.WithTimeout(base, 10*time.Second)
			_, err := s.Node.Apply(ctx, fsm.InitThresholds{Model: m,
				ActiveDecodeBlocks: s.cfg.InitialThresholds.ActiveDecodeBlocks, ActivePrefillTokens: s.cfg.InitialThresholds.ActivePrefillTokens})
			cancel()
			if err != nil {
				s.log.Warn("could not apply the initial busy thresholds; will retry", "model", m, "err", err)
				break
			}
			s.log.Info("initial busy thresholds applied", "model", m)
		}
	}
}

// kickThresholds wakes runInitialThresholds without blocking.
func (s *Server) kickThresholds() {
	select {
	case s.thresholdsKick <- struct{}{}:
	default:
	}
}
