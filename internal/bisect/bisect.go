package bisect

// Search probes depths of a path of length n through sig, which returns a
// summary of the set at depth d (1-based) that is equal for two depths
// exactly when their sets are equal, for nested sets (for example the set's
// size), and the zero value for an empty set.
//
// Every depth d where the set differs from the set at d+1 (including the
// last non-empty depth) ends up probed together with d+1, unless d is n.
// Callers record what they need inside sig; for a longest-prefix question
// the answer for an element is the deepest probed depth whose set holds it.
//
// When the deepest depth is non-empty the whole range is bisected at once;
// otherwise galloping (1, 2, 4, ...) finds where the path ends first, which
// keeps short prefixes of long paths cheap.
func Search[S comparable](n int, sig func(d int) S) {
	var empty S
	if n < 1 {
		return
	}
	first := sig(1)
	if first == empty || n == 1 {
		return
	}
	if last := sig(n); last != empty {
		split(1, n, first, last, sig)
		return
	}
	lo, slo := 1, first
	for d := 2; d < n; d *= 2 {
		sd := sig(d)
		split(lo, d, slo, sd, sig)
		if sd == empty {
			return
		}
		lo, slo = d, sd
	}
	split(lo, n, slo, empty, sig)
}

// split probes (a, b) until every change between a and b is bracketed by
// two adjacent probed depths.
func split[S comparable](a, b int, sa, sb S, sig func(int) S) {
	if sa == sb || b-a <= 1 {
		return
	}
	m := a + (b-a)/2
	sm := sig(m)
	split(a, m, sa, sm, sig)
	split(m, b, sm, sb, sig)
}
