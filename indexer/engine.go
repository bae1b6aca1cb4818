package indexer

// Engine hashes.
//
// A rank's engine names its blocks with opaque hashes; rankState.blocks
// maps each to the node it stands for. Usually one engine hash names one
// (node, rank) membership, but not always: an engine can give the same
// tokens at the same position two hashes (multimodal extra keys, which
// local hashes do not see). Then the membership carries an aliasSet: the
// tiers held under each hash, so that removing one hash leaves the others,
// and the membership ends exactly when its last hash goes. Nothing may
// leave an engine hash pointing at a node the rank no longer holds: freed
// node ids are reused.
//
// Every change of a membership goes through addHash and removeHash.

// aliasSet is the engine hashes of one (node, rank) membership that has
// more than one. One hash (the primary, whichever was first) is not listed;
// it holds primary. Each extra holds tiers != 0.
type aliasSet struct {
	primary uint8
	extras  []hashTiers
}

type hashTiers struct {
	hash  uint64
	tiers uint8
}

// aliased marks a holder whose membership has an aliasSet.
const aliased uint8 = 1 << 6

func (a *aliasSet) union() uint8 {
	t := a.primary
	for _, e := range a.extras {
		t |= e.tiers
	}
	return t
}

func (a *aliasSet) find(hash uint64) int {
	for i, e := range a.extras {
		if e.hash == hash {
			return i
		}
	}
	return -1
}

// addHash records that rank r holds node id on tier t under engine hash
// hash; named says whether hash already names id for r. hash must not name
// another node for r (applyStored moves it first).
func (ix *partIndex) addHash(r *rankState, hash uint64, id nodeID, t Tier, named bool) {
	n := ix.nodes.at(id)
	hi := ix.holderIdx(n, r.slot)
	if hi < 0 {
		hi = ix.addHolder(n, r.slot)
	}
	h := &ix.holders(n)[hi]
	bit := uint8(1) << t
	switch {
	case h.flags&aliased != 0:
		a := ix.aliases[spillKey{id, r.slot}]
		if i := a.find(hash); i >= 0 {
			a.extras[i].tiers |= bit
		} else if named {
			a.primary |= bit
		} else {
			a.extras = append(a.extras, hashTiers{hash, bit})
		}
		ix.setTiers(r, id, hi, a.union())
	case named || h.tiers() == 0:
		// The membership's only hash, or a new membership.
		ix.setTiers(r, id, hi, h.tiers()|bit)
	default:
		// A second hash for a block the rank already holds.
		a := &aliasSet{primary: h.tiers(), extras: []hashTiers{{hash, bit}}}
		ix.aliases[spillKey{id, r.slot}] = a
		h.flags |= aliased
		ix.setTiers(r, id, hi, a.union())
	}
	if !named {
		r.blocks.Put(hash, id)
	}
}

// removeHash drops the given tiers of the membership named by hash. It
// reports whether any of them was held under that hash. The hash is
// forgotten once it holds no tier.
func (ix *partIndex) removeHash(r *rankState, hash uint64, tiers uint8) bool {
	id, ok := r.blocks.Get(hash)
	if !ok {
		return false
	}
	ix.steps.change()
	n := ix.nodes.at(id)
	hi := ix.holderIdx(n, r.slot)
	if hi < 0 { // cannot happen while the invariants hold; stay safe
		r.blocks.Delete(hash)
		return false
	}
	h := &ix.holders(n)[hi]
	if h.flags&aliased == 0 {
		if h.tiers()&tiers == 0 {
			return false
		}
		left := h.tiers() &^ tiers
		if left == 0 {
			r.blocks.Delete(hash)
		}
		ix.setTiers(r, id, hi, left)
		return true
	}
	k := spillKey{id, r.slot}
	a := ix.aliases[k]
	if i := a.find(hash); i >= 0 {
		if a.extras[i].tiers&tiers == 0 {
			return false
		}
		if a.extras[i].tiers &^= tiers; a.extras[i].tiers == 0 {
			a.extras = append(a.extras[:i], a.extras[i+1:]...)
			r.blocks.Delete(hash)
		}
	} else {
		if a.primary&tiers == 0 {
			return false
		}
		if a.primary &^= tiers; a.primary == 0 {
			r.blocks.Delete(hash)
			// Another hash of the membership becomes the unlisted one.
			last := len(a.extras) - 1
			a.primary = a.extras[last].tiers
			a.extras = a.extras[:last]
		}
	}
	union := a.union()
	if len(a.extras) == 0 {
		delete(ix.aliases, k)
		h.flags &^= aliased
	}
	ix.setTiers(r, id, hi, union)
	return true
}

// hashTiers returns the tiers rank r holds node id on under engine hash.
func (ix *partIndex) hashTiers(r *rankState, id nodeID, hash uint64) uint8 {
	n := ix.nodes.at(id)
	hi := ix.holderIdx(n, r.slot)
	if hi < 0 {
		return 0
	}
	h := ix.holders(n)[hi]
	if h.flags&aliased == 0 {
		return h.tiers()
	}
	a := ix.aliases[spillKey{id, r.slot}]
	if i := a.find(hash); i >= 0 {
		return a.extras[i].tiers
	}
	return a.primary
}
