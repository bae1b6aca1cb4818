package kvsim

// InfiniteCacheHitRate is the prefix-cache hit rate a trace allows at
// most: every request hits the longest prefix of its prompt that any
// earlier request's prompt had, in full blocks of blockSize tokens as the
// engines count them (their hit tokens are capped at the prompt's length
// the same way), as if one cache of unbounded size held every prompt ever
// seen and every engine shared it. No router on any fleet beats it;
// greedy-prefix is a heuristic below it. traceBlockTokens <= 0 means
// DefaultTraceBlockTokens; blockSize <= 0 means DefaultBlockSize.
//
// Block hashes chain through their prefix, so the hits add up to the
// prompts' blocks less the distinct blocks among them, whatever the order
// the requests come in: the bound does not depend on the replay's speed.
// It is also optimistic about time: a request that arrives while the
// prompt it shares is still being prefilled counts the hit here, and not
// on an engine (blocks are cached when a prefill ends).
func InfiniteCacheHitRate(reqs []TraceRequest, traceBlockTokens, blockSize int) float64 {
	if blockSize <= 0 {
		blockSize = DefaultBlockSize
	}
	seen := map[uint64]struct{}{}
	var prompt, hit int64
	for _, q := range reqs {
		tokens := TraceTokens(q, traceBlockTokens)
		chain := engineHashes(tokens, blockSize)
		n := 0
		for n < len(chain) {
			if _, ok := seen[chain[n]]; !ok {
				break
			}
			n++
		}
		for _, h := range chain[n:] {
			seen[h] = struct{}{}
		}
		prompt += int64(len(tokens))
		hit += int64(min(n*blockSize, len(tokens)))
	}
	if prompt == 0 {
		return 0
	}
	return float64(hit) / float64(prompt)
}
