# Warden. `make run` starts a local 3-node cluster; `make test` runs the tests.
# Both fetch what they need (Go modules) on a fresh machine.

GO        ?= go
BIN       := bin/warden
PKGS      := ./...
# Unit packages run with the race detector; cluster tests run without it
# (dragonboat under -race is too slow for a 2-core CI box). admin/ and
# metrics/ start small clusters but are raced too: their scrape racing the
# admin server's shutdown went unseen while they ran without -race.
UNIT_PKGS := ./wire/... ./hierarchy/... ./statemachine/... ./placement/... ./client/... ./shard/ ./control/ ./lease/ ./feed/ ./raftnode/ ./router/ ./auth/ ./audit/ ./backup/ ./internal/... ./loadtest/... ./admin/ ./metrics/
TEST_TIMEOUT ?= 20m
# Benchmark output is not source: every benchmark writes under BENCH_OUT
# (git-ignored); docs/bench keeps the curated results the docs cite.
BENCH_OUT ?= build/bench

PYTHON    ?= /usr/bin/python3

.PHONY: all build run test test-unit test-cluster test-pg test-python vet bench bench-cluster bench-load bench-flood bench-peers bench-charts bench-scaling bench-growth fuzz clean deps chaos chaos-short test-chaos-short crash crash-bug

all: build

deps:
	@command -v $(GO) >/dev/null || { echo "Go is required (https://go.dev/dl)"; exit 1; }
	$(GO) mod download

# The version and commit `warden version`, /v1/status and warden_build_info
# report (git describe marks a tree with uncommitted changes "-dirty").
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   := -X github.com/wardenlock/warden/internal/buildinfo.version=$(VERSION) \
             -X github.com/wardenlock/warden/internal/buildinfo.commit=$(COMMIT)

build: deps
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/warden

run: build
	./$(BIN) dev --data-dir ./data

vet: deps
	$(GO) vet $(PKGS)

# chromium first: test-unit runs admin/'s status-page test (it skips without one).
test: vet chromium test-unit test-cluster test-pg test-python test-chaos-short

# The peer drivers live in their own module (loadtest/peers, so the main
# module does not depend on etcd's, ZooKeeper's and Redis's clients); their
# report's goal ratios are tested here.
test-unit: deps
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(UNIT_PKGS)
	$(MAKE) crash-bug
	cd loadtest/peers && $(GO) vet ./... && $(GO) test -count=1 ./cmd/peerbench/

test-cluster: deps build
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./node/... ./cmd/... ./examples/...

# Fault suite (chaos/, docs/testing.md). The short run (about 3 minutes:
# kill, partition and pause the leader under the lock register and the
# fenced set, plus one run per test-only bug switch, which must fail; the
# suite builds warden with the build tag `bugs` for its test hooks) is
# part of `make test`; `make chaos` runs every fault with every workload on
# 3 and 5 nodes and writes the figures to $(BENCH_OUT)/faults.txt.
test-chaos-short chaos-short: deps
	$(GO) test -count=1 -timeout 15m ./chaos/

chaos: deps
	$(GO) run ./cmd/warden-chaos run --schedule full --trials 50 --out $(BENCH_OUT)/faults.txt

# Power loss (docs/testing.md). test-unit runs a bounded crash-point test of
# the Raft log store and of the audit store (a workload on a file system
# that loses power after chosen operations; each image must open and keep
# everything acknowledged). `make crash` runs many more workloads, every
# crash mode at every operation: CRASH_SEEDS workloads from CRASH_SEED (0:
# from the clock). `make crash-bug` builds the log store with one directory
# sync left out (build tag crashbug) and expects the test to report lost
# acknowledged records.
CRASH_SEEDS ?= 20
CRASH_SEED ?= 0
crash: deps
	$(GO) test -count=1 -timeout 0 -v -run 'TestPowerLoss' ./internal/raftwal/ \
	  -args -crash.seed=$(CRASH_SEED) -crash.seeds=$(CRASH_SEEDS) -crash.steps=600 -crash.allmodes
	$(GO) test -count=1 -timeout 0 -v -run 'TestPowerLoss' ./audit/ \
	  -args -crash.seed=$(CRASH_SEED) -crash.seeds=$(CRASH_SEEDS) -crash.steps=500 -crash.points=0 -crash.allmodes

crash-bug: deps
	$(GO) test -count=1 -tags crashbug -run 'TestPowerLossCatchesASkippedDirectorySync' ./internal/raftwal/

# The fence package's guarded SQL update, against a real PostgreSQL server
# (installed from Debian when missing, started on 127.0.0.1, removed after).
test-pg: deps
	./scripts/with-postgres.sh $(GO) test -count=1 -timeout 5m ./fence/

# The Python client (clients/python) against `warden serve` processes its
# pytest fixtures start from bin/warden, with the Go CLI as the other
# client. Runs under Debian's interpreter; installs python3-msgpack,
# python3-pytest, python3-pytest-timeout (a test that hangs fails with every
# thread's stack) and python3-pip (for the offline install test) when missing.
test-python: build
	@$(PYTHON) -c 'import msgpack, pytest, pytest_timeout, pip' 2>/dev/null || { \
		echo "test-python: installing python3-msgpack python3-pytest python3-pytest-timeout python3-pip (Debian packages)" >&2; \
		if [ "$$(id -u)" -eq 0 ]; then sudo=; else sudo=sudo; fi; \
		$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq python3-msgpack python3-pytest python3-pytest-timeout python3-pip >/dev/null; }
	WARDEN_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m pytest -q -p no:cacheprovider --timeout 300 clients/python/tests

bench: deps
	@mkdir -p $(BENCH_OUT)
	$(GO) test -run='^$$' -bench=. -benchmem -count=5 ./statemachine/ ./hierarchy/ ./wire/ | tee $(BENCH_OUT)/statemachine.txt
	$(GO) test -run='^$$' -bench=. -benchtime=3s -count=3 ./node/ | tee $(BENCH_OUT)/cluster.txt

# The same closed-loop load over 1, 2, 4 and 8 shard leaders on 3 and 5
# nodes, each node a `warden serve` process in its own cgroup limited to
# SCALING_CPU cores, i.e. a machine's CPU budget (cgroups need root); then,
# appended, the same sweep with a load that grows with the leaders
# (SCALING_PER_LEADER workers per leader; 0 skips it). About 13 minutes,
# stops by itself; writes $(BENCH_OUT)/scaling.md, the input of
# docs/scaling.md. SCALING_SECONDS measured per row; SCALING_CLIENTS
# workers of the same-load sweep, one operation in flight each; SCALING_CPU
# cores per node (0: no quotas); SCALING_BATCH > 0 bounds each leader to
# that many operations per entry with one entry in flight (0: the server
# defaults); SCALING_ROUNDS > 1 runs the same-load sweep that many times
# (leader order reversed every other round) and reads the growth off each
# row's median; SCALING_FLAGS passes more flags to both sweeps (e.g.
# --nodes 5, --leaders 1,8).
SCALING_SECONDS ?= 10
SCALING_ROUNDS ?= 3
SCALING_CLIENTS ?= 1024
SCALING_PER_LEADER ?= 64
SCALING_CPU ?= 0.25
SCALING_BATCH ?= 0
SCALING_FLAGS ?=
SCALING_RUN = $(GO) run ./loadtest/cmd/benchscaling --warden $(BIN) --out $(BENCH_OUT)/scaling.md \
	  --duration $(SCALING_SECONDS)s --cpu $(SCALING_CPU) --batch $(SCALING_BATCH) $(SCALING_FLAGS)
bench-scaling: build
	$(SCALING_RUN) --clients $(SCALING_CLIENTS) --rounds $(SCALING_ROUNDS)
	if [ "$(SCALING_PER_LEADER)" -gt 0 ]; then $(SCALING_RUN) --append --clients-per-leader $(SCALING_PER_LEADER); fi

# A cluster growing from 3 to 5 cgroup-limited nodes under a load larger than
# it serves, the shard policy choosing the shard count; figures in
# build/bench/growth.md.
GROWTH_FLAGS ?=
bench-growth: build
	$(GO) run ./loadtest/cmd/benchgrowth --warden $(BIN) --out build/bench/growth.md $(GROWTH_FLAGS)

# Warden alone: 3 processes per shard count (1..16), the scenario set at 8
# shards, CPU profiles; writes $(BENCH_OUT)/load.{md,json,html} and profiles/.
BENCH_LOAD_FLAGS ?=
bench-load: build
	$(GO) run ./loadtest/cmd/benchload --warden $(BIN) --out $(BENCH_OUT) $(BENCH_LOAD_FLAGS)

# A flooded admin port and one identity's lease flood against a well-behaved
# client and the probes (TLS, auth on); figures in $(BENCH_OUT)/flood.{md,json}.
bench-flood: build
	$(GO) run ./loadtest/cmd/benchflood --warden $(BIN) --out $(BENCH_OUT) $(BENCH_FLOOD_FLAGS)

# Warden (at 1 and at 8 data shards: --shards), etcd (3 members), ZooKeeper
# (3 servers) and Redis one after another, after a probe of the disk and of
# the machine's floor (a bare replicated durable round); installs the peers
# from Debian when missing. Writes $(BENCH_OUT)/peers.{md,json,html}.
BENCH_PEERS_FLAGS ?=
bench-peers: build
	loadtest/peers/bench-peers.sh $(BIN) $(BENCH_OUT) $(BENCH_PEERS_FLAGS)

# The curated comparison's report and charts (docs/bench/peers.{md,svg},
# latency.svg), drawn again from its saved run (docs/bench/peers.json).
bench-charts:
	cd loadtest/peers && $(GO) run ./cmd/peerbench --from $(CURDIR)/docs/bench/peers.json --out $(CURDIR)/docs/bench --shards 1

# Every fuzz target of the module, FUZZTIME each (internal/repocheck's test,
# part of `make test`, fails when a Fuzz function is not listed here).
FUZZTIME ?= 30s
fuzz: deps
	$(GO) test -run='^$$' -fuzz='^FuzzReadFrame$$' -fuzztime=$(FUZZTIME) ./wire/
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeRequest$$' -fuzztime=$(FUZZTIME) ./wire/
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeResponse$$' -fuzztime=$(FUZZTIME) ./wire/
	$(GO) test -run='^$$' -fuzz='^FuzzReaderAgreesWithLibrary$$' -fuzztime=$(FUZZTIME) ./wire/
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZTIME) ./auth/
	$(GO) test -run='^$$' -fuzz='^FuzzApply$$' -fuzztime=$(FUZZTIME) ./statemachine/

clean:
	rm -rf bin data build

# Operations (ops/, admin/, metrics/). IMAGE is built FROM scratch from the
# static binary, so no registry is needed.
IMAGE ?= warden:dev
image: build
	rm -rf build/image && mkdir -p build/image/data && cp $(BIN) build/image/warden
	docker build -t $(IMAGE) -f ops/Dockerfile build/image

# Builds the image, starts 3 nodes + a router with compose, takes a lock
# through the router, kills a node, takes another; bounded, cleans up.
compose-test: build
	timeout 300 sh ops/compose/compose-test.sh

# Admin API, metrics and the status page in a real headless Chromium.
test-ops: deps chromium
	$(GO) test -race -count=1 -timeout 5m ./admin/ ./metrics/

# Debian's chromium for the status-page browser test (needs root for apt).
chromium:
	@command -v chromium >/dev/null || { apt-get update && apt-get install -y --no-install-recommends chromium; }

browser-test: deps chromium
	$(GO) test -count=1 -timeout 5m -run TestStatusPageInChromium -v ./admin/
