// Package msgpackx reads msgpack without reflection and without trusting
// the input: a bounds-checked cursor that never allocates (but OptStr,
// which returns a copy as a string; OptBytes does not) and never sizes
// anything from a length the input has not backed with bytes.
// Test_ReaderAllocatesNothing holds it to that.
//
// Two decoders of untrusted frames use it: the vLLM KV event payloads
// (indexer.WireDecoder, a few thousand integers per message on the
// ingestion hot path) and the replica-sync messages of other selector
// nodes (zmqsync). Both are fuzzed.
package msgpackx
