package kvsim

import (
	"encoding/binary"

	"github.com/zeebo/xxh3"
)

// engineHashSeed differs from kvselect's local-hash seed (1337) on purpose:
// a real engine's block hashes are opaque to the router, and a simulator
// whose hashes happened to equal the router's would hide bugs where the
// router indexes engine hashes instead of its own.
const engineHashSeed = 0x6b7673696d2d6b76 // "kvsim-kv"

// engineHashes returns the chained engine hash of every full block of
// tokens: block i hashes (le64 hash of block i-1, or 0 for the first,
// followed by the block's tokens as le32).
func engineHashes(tokens []uint32, blockSize int) []uint64 {
	n := len(tokens) / blockSize
	if n == 0 {
		return nil
	}
	hashes := make([]uint64, n)
	buf := make([]byte, 8+4*blockSize)
	var parent uint64
	for i := range n {
		binary.LittleEndian.PutUint64(buf, parent)
		for j, t := range tokens[i*blockSize : (i+1)*blockSize] {
			binary.LittleEndian.PutUint32(buf[8+4*j:], t)
		}
		parent = xxh3.HashSeed(buf, engineHashSeed)
		hashes[i] = parent
	}
	return hashes
}
