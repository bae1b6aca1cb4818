package suggest

import "strings"

// maxDistance is how many edits (insertions, deletions, substitutions)
// a typo may be from a name and still suggest it: cobra's default.
const maxDistance = 2

// Names returns the candidates within maxDistance edits of typed, or that
// start with it, in the order given. A typed name shorter than two
// characters (a shorthand) suggests nothing: everything is near it.
func Names(typed string, candidates []string) []string {
	if len(typed) < 2 {
		return nil
	}
	var out []string
	for _, c := range candidates {
		if Distance(typed, c) <= maxDistance || strings.HasPrefix(c, typed) {
			out = append(out, c)
		}
	}
	return out
}

// Distance is the Levenshtein distance between a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
