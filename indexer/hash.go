package indexer

import (
	"encoding/binary"
	"math/bits"

	"github.com/zeebo/xxh3"
)

// HashSeed is the XXH3 seed of Dynamo-compatible block and sequence hashes.
const HashSeed = 1337

// LoraSeed returns the block-hash seed for a LoRA adapter: the base seed
// plus XXH3-64 of the adapter name (seed 0), wrapping. An empty name keeps
// the base seed.
func LoraSeed(loraName string) uint64 {
	if loraName == "" {
		return HashSeed
	}
	return HashSeed + xxh3.HashString(loraName)
}

// BlockHashes returns the local block hash of every full block of tokens:
// XXH3-64 over the block's tokens as consecutive little-endian u32 values.
// A trailing partial block is ignored, as in Dynamo.
func BlockHashes(tokens []uint32, blockSize int, loraName string) []uint64 {
	if blockSize <= 0 {
		return nil
	}
	n := len(tokens) / blockSize
	out := make([]uint64, n)
	seed := LoraSeed(loraName)
	buf := make([]byte, 4*blockSize)
	for i := range n {
		out[i] = hashTokens(buf, tokens[i*blockSize:(i+1)*blockSize], seed)
	}
	return out
}

// BlockHash hashes one block of tokens with the given seed (see LoraSeed).
func BlockHash(tokens []uint32, seed uint64) uint64 {
	return hashTokens(make([]byte, 4*len(tokens)), tokens, seed)
}

func hashTokens(buf []byte, tokens []uint32, seed uint64) uint64 {
	buf = buf[:4*len(tokens)]
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(buf[4*i:], t)
	}
	return xxh3.HashSeed(buf, seed)
}

// SequenceHashes chains local block hashes into position-aware sequence
// hashes: seq[0] = block[0], seq[i] = XXH3-64(le64(seq[i-1]) ‖ le64(block[i])).
func SequenceHashes(blocks []uint64) []uint64 {
	out := make([]uint64, len(blocks))
	for i, b := range blocks {
		if i == 0 {
			out[0] = b
			continue
		}
		out[i] = ChainHash(out[i-1], b)
	}
	return out
}

// ChainHash extends a sequence hash by one block: XXH3-64 with seed 1337
// over le64(parent) ‖ le64(block). Nodes of the prefix index are keyed by
// it, so a node's key is the sequence hash of its path.
//
// Matching hashes every block of a query, so this is XXH3's 9-16 byte path
// specialised to 16 bytes and the fixed seed: the secret words and seed
// fold into two constants. Test_ChainHashMatchesXXH3 checks it against the
// library.
func ChainHash(parent, block uint64) uint64 {
	const (
		// XXH3 default secret, bytes 24..55, as little-endian words.
		secret24 = 0x1f67b3b7a4a44072
		secret32 = 0x78e5c0cc4ee679cb
		secret40 = 0x2172ffcc7dd05a82
		secret48 = 0x8e2443f7744608b8
		bitflip1 = (secret24 ^ secret32) + HashSeed
		bitflip2 = (secret40 ^ secret48) - HashSeed
	)
	lo := parent ^ bitflip1
	hi := block ^ bitflip2
	mh, ml := bits.Mul64(lo, hi)
	h := 16 + bits.ReverseBytes64(lo) + hi + (mh ^ ml)
	h ^= h >> 37
	h *= 0x165667919e3779f9
	return h ^ h>>32
}

// chainHashGeneric is ChainHash through the library, for tests.
func chainHashGeneric(parent, block uint64) uint64 {
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], parent)
	binary.LittleEndian.PutUint64(buf[8:], block)
	return xxh3.HashSeed(buf[:], HashSeed)
}
