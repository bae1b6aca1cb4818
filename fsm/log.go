package fsm

import "github.com/hashicorp/raft"

// Log drives an FSM without raft: it applies commands at increasing log
// indexes and calls its observers after each one, like the cluster's
// watcher does. It exists for tests and tools of the packages that consume
// the catalog.
type Log struct {
	FSM       *FSM
	index     uint64
	observers []Observer
}

// NewLog returns a Log over a fresh FSM of a cluster this release
// bootstrapped: the catalog rules (rules.go) are on from its first entry,
// as the first leader writes them. A Log over New() starts with them off,
// as a log of the release before does.
func NewLog(observers ...Observer) *Log {
	l := &Log{FSM: New(), observers: observers}
	l.FSM.cur.Store(&Catalog{workers: map[uint64]*Worker{}, partitions: map[PartitionKey]*Partition{},
		nodes: map[string]NodeMeta{}, rules: CatalogRulesCurrent})
	return l
}

// Apply encodes and applies one command. It returns the command's result;
// the error is only an encoding failure.
func (l *Log) Apply(c Command) (*Result, error) {
	data, err := EncodeCommand(c)
	if err != nil {
		return nil, err
	}
	prev := l.FSM.Catalog()
	l.index++
	res := l.FSM.Apply(&raft.Log{Index: l.index, Type: raft.LogCommand, Data: data}).(*Result)
	if len(l.observers) > 0 {
		ch := NewChange(prev, l.FSM.Catalog())
		for _, o := range l.observers {
			o(ch)
		}
	}
	return res, nil
}

// Upsert applies an upsert of w.
func (l *Log) Upsert(w Worker) (*Result, error) {
	return l.Apply(UpsertWorker{Worker: w})
}
