package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kvselect/kvselect/kvsim"
)

// traceGen is kvbench trace-gen: a synthetic Mooncake trace with another
// sharing pattern (kvsim.GenerateTrace), for routing runs on traces a
// policy was not tuned on.
func traceGen(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("trace-gen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c kvsim.TraceGenConfig
	d := kvsim.TraceGenConfig{}.WithDefaults()
	fs.StringVar(&c.Pattern, "pattern", kvsim.PatternTenants, "sharing pattern: "+strings.Join(kvsim.TracePatterns, ", ")+
		" (tenants: long shared system prompts, short unique suffixes; sessions: multi-turn conversations whose prompts grow; random: near-random prompts)")
	fs.IntVar(&c.Requests, "requests", d.Requests, "requests")
	fs.Float64Var(&c.Rate, "rate", d.Rate, "mean arrivals per second (Poisson); about the shared trace's")
	fs.Uint64Var(&c.Seed, "seed", 1, "the same seed, the same trace")
	fs.IntVar(&c.TraceBlockTokens, "trace-block-tokens", kvsim.DefaultTraceBlockTokens, "tokens per hash id (kvbench routing's -trace-block-tokens must match)")
	fs.IntVar(&c.OutputMedian, "output-median", d.OutputMedian, "median output tokens (log-normal, mean about twice the median)")
	fs.IntVar(&c.Tenants, "tenants", d.Tenants, "tenants: how many (popularity Zipf, -tenant-skew)")
	fs.Float64Var(&c.TenantSkew, "tenant-skew", d.TenantSkew, "tenants: Zipf exponent of their popularity (> 1; higher, fewer popular tenants)")
	fs.IntVar(&c.SystemBlocks, "system-blocks", d.SystemBlocks, "tenants: mean system prompt length in hash ids")
	fs.IntVar(&c.SuffixBlocks, "suffix-blocks", d.SuffixBlocks, "tenants: mean unique suffix length in hash ids")
	fs.IntVar(&c.Turns, "turns", d.Turns, "sessions: mean turns per session")
	fs.IntVar(&c.FirstBlocks, "first-blocks", d.FirstBlocks, "sessions: mean first prompt length in hash ids")
	fs.IntVar(&c.TurnBlocks, "turn-blocks", d.TurnBlocks, "sessions: mean hash ids each turn adds (answer and next question)")
	fs.Float64Var(&c.ThinkSeconds, "think", d.ThinkSeconds, "sessions: mean seconds between a session's turns")
	fs.IntVar(&c.MaxBlocks, "max-blocks", d.MaxBlocks, "sessions: a session ends before its prompt passes this many hash ids")
	fs.IntVar(&c.PromptBlocks, "prompt-blocks", d.PromptBlocks, "random: mean prompt length in hash ids")
	out := fs.String("out", "-", "trace file ('-' for standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	reqs, err := kvsim.GenerateTrace(c)
	if err != nil {
		return err
	}
	if err := writeTraceFile(*out, stdout, reqs); err != nil {
		return err
	}
	in, output := 0, 0
	for _, q := range reqs {
		in += q.InputLength
		output += q.OutputLength
	}
	fmt.Fprintf(stderr, "trace-gen: %s, %d requests over %.0f s, mean %d input and %d output tokens, infinite-cache hit rate %.3f (in 16-token blocks)\n",
		c.Pattern, len(reqs), reqs[len(reqs)-1].Timestamp/1000, in/len(reqs), output/len(reqs),
		kvsim.InfiniteCacheHitRate(reqs, c.TraceBlockTokens, defaultRoutingBlock))
	return nil
}

// writeTraceFile writes reqs to path, or to stdout for "-".
func writeTraceFile(path string, stdout io.Writer, reqs []kvsim.TraceRequest) error {
	if path == "-" {
		return kvsim.WriteTrace(stdout, reqs)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := kvsim.WriteTrace(f, reqs); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
