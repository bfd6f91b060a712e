# jobpipe developer tasks. `make` alone lists them.
#
# Variables (override on the command line, e.g. `make test TIMEOUT=40m TESTFLAGS='-run Unique -v'`):
#   TIMEOUT    go test -timeout                                           (default 20m)
#   TESTFLAGS  extra go test flags for test, test-containers and bench    (default none)
#   GOFLAGS    passed to every go command through the environment
#   FAULTSFLAGS extra go test flags for test-faults, e.g. FAULTSFLAGS='-run TestFault09 -v'
#   FUZZTIME   how long fuzz runs each fuzz target                        (default 10s)
#   PEER_SCENARIOS, PEER_JOBS, PEER_DURATION, PEER_RATE, PEER_RATE_DURATION, ROUNDS  bench-peers:
#              the scenarios, drain's jobs, steady's window, rate's jobs/s and how long, rounds
#              (defaults "drain steady rate", 1000000, 60s, 600, 5m, 3)
#   PEER_JOBPIPE_FLAGS  bench-peers: flags for jobpipe's drain and steady (default "--workers 2000", River's count)
#
# How the tests find PostgreSQL and Redis (TEST_DATABASE_URL/TEST_REDIS_URL, local servers, or
# testcontainers) is described in internal/testenv/doc.go.

SHELL := bash
.DEFAULT_GOAL := help

GO        ?= go
TIMEOUT   ?= 20m
TESTFLAGS ?=
export GOFLAGS

# staticcheck v0.8.2 is the release named 2026.2.2, the latest on the module proxy when pinned.
# The proxy only knows the v0.x names (`go list -m honnef.co/go/tools@latest`).
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

.PHONY: help services local-services hugepages chromium test test-faults fuzz test-containers lint build demo bench bench-peers

help: ## List the targets (this text)
	@echo "Targets:"
	@awk 'BEGIN { FS = ":[^#]*## " } /^[a-zA-Z0-9_-]+:[^#]*## / { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

services: ## Make PostgreSQL (127.0.0.1:5432) and Redis (127.0.0.1:6379) answer: start them, or install them (root + apt)
	.ci/services.sh

# Starts local servers that are installed but stopped; never installs and never fails, since the
# tests can also use TEST_DATABASE_URL/TEST_REDIS_URL or testcontainers (Docker or Podman).
local-services:
	@.ci/services.sh --optional

# Reserves huge pages (root) for the PostgreSQL clusters the tests start themselves; never fails.
hugepages:
	@.ci/hugepages.sh

chromium: ## Make sure Chromium is installed for the dashboard's browser test (installs it: root + apt)
	@.ci/chromium.sh

test: local-services hugepages chromium ## Run every package's tests with the race detector (TIMEOUT, TESTFLAGS)
	$(GO) test -race -count=1 -timeout $(TIMEOUT) $(TESTFLAGS) ./...

# The fault scenarios measure throughput, so they run without the race detector (make test runs the
# same code with it) and one package at a time.
FAULTS_TIMEOUT ?= 25m
FAULTSFLAGS    ?=
FAULTS_REPORT  ?= $(or $(JOBPIPE_ARTIFACTS_DIR),$(or $(TMPDIR),/tmp)/jobpipe-artifacts)/faults.txt
FUZZTIME       ?= 10s
export FUZZTIME

test-faults: local-services hugepages ## Run the fault suite (docs/reliability.md) and print each scenario's figures (FAULTSFLAGS)
	@mkdir -p $(dir $(FAULTS_REPORT)) && rm -f $(FAULTS_REPORT)
	@status=0; JOBPIPE_FAULTS=1 JOBPIPE_FAULTS_REPORT=$(FAULTS_REPORT) $(GO) test -count=1 -timeout $(FAULTS_TIMEOUT) \
		-run '^TestFault' $(FAULTSFLAGS) ./integration_test/ || status=$$?; \
	echo "==== fault scenarios' figures ($(FAULTS_REPORT)) ===="; cat $(FAULTS_REPORT) 2>/dev/null || echo "(none recorded)"; \
	exit $$status

fuzz: ## Run every fuzz target for FUZZTIME each, from its checked-in seed corpus
	.ci/fuzz.sh

test-containers: ## Run the integration suite on servers started by testcontainers (needs Docker or Podman)
	JOBPIPE_TEST_SERVERS=containers $(GO) test -race -count=1 -timeout $(TIMEOUT) $(TESTFLAGS) ./integration_test/...

lint: ## gofmt (lists unformatted files), go vet and staticcheck
	@unformatted=$$(find . -name '*.go' -not -path './.git/*' -not -path '*/testdata/*' -print0 | xargs -0 gofmt -l); \
	if [[ -n $$unformatted ]]; then echo "gofmt: these files need gofmt -w:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

build: ## Build the jobpipe command into bin/jobpipe
	$(GO) build -o bin/jobpipe ./cmd/jobpipe

demo: services ## Run the demo (jobpipe demo) against the local servers
	$(GO) run ./cmd/jobpipe demo

bench: local-services ## Run the benchmarks (no tests) with allocation counts
	$(GO) test -run '^$$' -bench . -benchmem -timeout $(TIMEOUT) $(TESTFLAGS) ./...

# River's benchmark is a module of its own (bench/peers/river), so jobpipe never depends on River.
PEER_SCENARIOS     ?= drain steady rate
PEER_JOBS          ?= 1000000
PEER_DURATION      ?= 60s
PEER_RATE          ?= 600
PEER_RATE_DURATION ?= 5m
ROUNDS             ?= 3
PEER_JOBPIPE_FLAGS ?= --workers 2000

bench-peers: local-services ## Compare jobpipe with River: jobs/s ratios (drain, steady), CPU-per-job ratios and p99s (rate), medians (PEER_SCENARIOS, PEER_JOBS, PEER_DURATION, PEER_RATE, PEER_RATE_DURATION, ROUNDS, PEER_JOBPIPE_FLAGS)
	PEER_SCENARIOS="$(PEER_SCENARIOS)" PEER_JOBS=$(PEER_JOBS) PEER_DURATION=$(PEER_DURATION) PEER_RATE=$(PEER_RATE) \
		PEER_RATE_DURATION=$(PEER_RATE_DURATION) ROUNDS=$(ROUNDS) PEER_JOBPIPE_FLAGS="$(PEER_JOBPIPE_FLAGS)" bench/peers/compare.sh
