# kvselect — build, run, test, benchmark.
#
#   make run     build and start a local 3-node cluster with simulated workers and a demo (Ctrl-C stops it)
#   make test    formatting, vet, every Go test with the race detector, and the Python client's tests
#   make bench   in-process benchmarks, figures in bench/results/
#   make bench-routing  routing quality on the shared trace: kvselect vs the other policies and the baselines, one speed (under 10 min)
#   make bench-routing-sweep  the same at speeds 2-12x on a uniform and a mixed fleet, busy thresholds set (about an hour)
#   make jepsen  every fault-injection scenario (JEPSEN_TIME each, default 60s) and the table; make test runs kill-leader, partition-isolate-leader and worker-link-cut, 20 s each
#   make soak    3 real nodes and kvsim under mixed load for SOAK_DURATION (default 10m): memory must stay flat
#   make fuzz    run every fuzz target (scripts/fuzz.sh finds them) for FUZZTIME each (default 30s)
#   make docs    regenerate docs/api.md, the HTTP API reference, from api/openapi.json

# Go is found on PATH or in its standard install location.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
export PATH := $(dir $(GO)):$(PATH)

BIN        := bin
# What --version and kvselect_build_info report: make build VERSION=v1.2.3.
VERSION    ?=
COMMIT     ?= $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null || c=$$c-modified; echo $$c; })
VERSION_PKG := github.com/kvselect/kvselect/internal/version
LDFLAGS    := -X $(VERSION_PKG).Commit=$(COMMIT) $(if $(VERSION),-X $(VERSION_PKG).Version=$(VERSION))
PORT       ?= 8092
RAFT_PORT  ?= 7092
SIM_PORT   ?= 8093
BENCHTIME  ?= 2s
FUZZTIME   ?= 30s
SOAK_DURATION ?= 10m
TESTFLAGS  ?=

.PHONY: all build run test test-go test-python vet fmt-check bench bench-routing bench-routing-sweep soak jepsen fuzz docs tools interop-deps python-deps clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# The demo talks to the nodes with curl and reads JSON with python3;
# install them only when they are missing.
tools:
	@command -v curl >/dev/null 2>&1 || { echo "installing curl (apt-get)"; $(call APT_INSTALL,curl); }
	@command -v python3 >/dev/null 2>&1 || { echo "installing python3 (apt-get)"; $(call APT_INSTALL,python3); }

# The libzmq interop test publishes from Python on Debian's pyzmq and
# msgpack; install them only when /usr/bin/python3 cannot import them.
APT_INSTALL = if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get install -y -qq $(1) >/dev/null 2>&1 || \
	{ $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $(1) >/dev/null; }

interop-deps:
	@/usr/bin/python3 -c 'import zmq, msgpack' 2>/dev/null || { \
	  echo "installing python3-zmq python3-msgpack (apt-get)"; \
	  $(call APT_INSTALL,python3 python3-zmq python3-msgpack); }

# The Python client's tests run on Debian's python3 with python3-pytest;
# install them only when /usr/bin/python3 cannot import pytest.
python-deps:
	@/usr/bin/python3 -c 'import pytest' 2>/dev/null || { \
	  echo "installing python3-pytest (apt-get)"; \
	  $(call APT_INSTALL,python3 python3-pytest); }

run: build tools
	@PORT=$(PORT) RAFT_PORT=$(RAFT_PORT) SIM_PORT=$(SIM_PORT) BIN=$(BIN) scripts/run-demo.sh

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...
	cd jepsen && $(GO) vet ./...

# Fuzz targets run their seed corpus (testdata/fuzz) as ordinary tests here.
test: fmt-check vet test-go test-python

# scripts/ runs the make run demo, which needs curl and python3 (tools).
# In jepsen/: the checkers' self-tests and the CI subset (TestSmoke:
# kill-leader, partition-isolate-leader and worker-link-cut, 20 s each,
# authentication on, under the full verdict; about 2.5 minutes).
test-go: interop-deps tools
	KVSELECT_REQUIRE_INTEROP=1 KVSELECT_REQUIRE_DEMO=1 $(GO) test -race -count=1 -timeout 12m $(TESTFLAGS) ./...
	cd jepsen && $(GO) test -race -count=1 -timeout 10m $(TESTFLAGS) ./...

# The fault-injection suite (its own module, jepsen/): every nemesis for
# JEPSEN_TIME on a fresh 3-process cluster with authentication on, then
# the table; a run passes only if every check holds (jepsen/doc.go). Each
# run's history, nemesis events, timeline (history.html), summary and node
# logs go to JEPSEN_OUT. JEPSEN_NEMESIS=a,b runs only those.
JEPSEN_TIME ?= 60s
JEPSEN_OUT  ?= bench/jepsen
jepsen:
	cd jepsen && JEPSEN_ALL=1 JEPSEN_TIME=$(JEPSEN_TIME) JEPSEN_OUT=$(abspath $(JEPSEN_OUT)) \
	  $(GO) test -count=1 -timeout 120m -run '^TestJepsen$$' -v ./...

# The Python client against real kvselect and kvsim processes.
test-python: build python-deps
	cd clients/python && /usr/bin/python3 -m pytest -q -p no:cacheprovider $(PYTESTFLAGS) tests

# The benchmarks' output goes through tee; pipefail (bash) makes a benchmark
# that fails or crashes fail make bench instead of being hidden by tee.
bench: SHELL := bash
bench: .SHELLFLAGS := -o pipefail -c
bench: build
	@mkdir -p bench/results
	{ $(GO) test -run '^$$' -bench . -skip 'Match10M|MatchUnderApply' -benchtime $(BENCHTIME) -count 1 ./indexer/ ./scheduler/ && \
	  $(GO) test -run '^$$' -bench 'Match10M|MatchUnderApply' -benchtime 100000x -count 1 ./indexer/ && \
	  $(GO) test -run '^$$' -bench Ingest -benchtime 100000x -count 1 ./ingest/ && \
	  $(GO) test -run '^$$' -bench CatalogWrite -benchtime 500x -count 1 ./server/ && \
	  $(GO) test -run '^$$' -bench SelectHTTP -benchtime 1x -count 1 ./server/ && \
	  $(GO) test -run '^$$' -bench DumpTransfer -benchtime 1x -count 1 ./http/ && \
	  $(GO) test -run '^$$' -bench ReplicaSyncHTTP -benchtime 1x -count 1 ./server/ && \
	  $(GO) test -run '^$$' -bench PublishToApply -benchtime 1x -count 1 ./zmqsync/; } \
	  | tee bench/results/go-bench.txt
	$(BIN)/kvbench report -in bench/results/go-bench.txt -out bench/results/inprocess.json

# Routing quality (SPEC §12): the Mooncake trace through kvsim's timed
# engines in virtual time, routed by in-process kvselect nodes (3 per
# strategy: the shipped default with replica sync on and off, then each
# other compared policy) and by round-robin, random, least-loaded (true
# engine load) and greedy-prefix; one table with the targets,
# bench/results/routing.json and routing.svg. make test runs a 50-request
# smoke of it (cmd/kvbench Test_RoutingSmoke).
# ROUTING_FLAGS passes more, e.g. ROUTING_FLAGS='-speed 4 -limit 1000 -gate'.
ROUTING_TRACE ?= testdata/traces/mooncake_synthetic_trace.jsonl
ROUTING_FLAGS ?=
bench-routing: build
	@mkdir -p bench/results
	$(BIN)/kvbench routing -trace $(ROUTING_TRACE) -out bench/results/routing.json -svg bench/results/routing.svg $(ROUTING_FLAGS)

# The sweep: the same at several speeds (SWEEP_SPEEDS), with the nodes'
# busy threshold set, on a uniform fleet and on one where a quarter of the
# engines are half as fast; TTFT p90, E2E p99 and goodput per strategy,
# bench/results/routing-sweep.json and routing-sweep.svg. SWEEP_FLAGS passes
# more, e.g. SWEEP_FLAGS='-fleets hetero -strategies kvselect,predicted-ttft,round-robin -limit 2000'.
SWEEP_SPEEDS ?= 2,4,6,8,12
SWEEP_FLAGS  ?=
bench-routing-sweep: build
	@mkdir -p bench/results
	$(BIN)/kvbench routing-sweep -trace $(ROUTING_TRACE) -speeds $(SWEEP_SPEEDS) -out bench/results/routing-sweep.json \
	  -svg bench/results/routing-sweep.svg $(SWEEP_FLAGS)

# Not part of make test: real processes for SOAK_DURATION. Exits non-zero
# unless memory and goroutines end flat, errors stay under 0.1 % and every
# node's load returns to zero; kvbench soak -h lists the knobs.
soak: build
	$(BIN)/kvbench soak -bin $(BIN) -duration $(SOAK_DURATION) -out bench/results/soak.json

# Every fuzz target the module has (scripts/fuzz.sh finds them; -list
# prints them), FUZZTIME each.
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

# The API reference is generated from the OpenAPI document a node serves;
# internal/apidoc's test fails when docs/api.md is not what this writes.
docs:
	$(GO) run ./internal/apidoc -in api/openapi.json -out docs/api.md

clean:
	rm -rf $(BIN) run
