GOLANGCI_LINT_VERSION := v2.6.2
# actionlint checks .github/workflows (make actionlint; .ci/run runs it). With shellcheck on the
# PATH it also checks the workflows' run: scripts.
ACTIONLINT_VERSION := v1.7.12
# promtool of Prometheus v3.16.0 (the module is versioned v0.3XX.Y for v3.XX.Y); the compose
# file's prom/prometheus image is the same release. remove_all_sd leaves out the service
# discovery plugins promtool does not need here (half the modules, half the build time).
PROMTOOL_VERSION := v0.316.0
GOBIN ?= $(shell go env GOPATH)/bin
# The repository's Go modules: the service (.) and the embedded server (embedded/, its own
# module, used from here through go.work and the replace in go.mod).
MODULES := . embedded
# The test of the Kubernetes manifests (deploy/k8s): its own module, outside go.work, so that
# k8s.io/api and the Prometheus Operator's types never enter rollup's dependency graph. Every
# go command on it runs with GOWORK=off.
K8S_MODULE := deploy/k8s

# How many test packages run at once (go test's -p, GOMAXPROCS by default: 2 here). Most of
# the slow packages wait (a fault held 30-60 s, a browser, processes that restart), so 5 at a
# time overlap those waits with the others' CPU: the run is 2 min 43 s on 2 cores, the median
# of 7 (docs/testing.md, "Five at a time, and no second at exit" and "Under 3 minutes").
TEST_PACKAGES_AT_ONCE ?= 5
# Every race-instrumented process sleeps 1 s when it exits (the race runtime's
# atexit_sleep_ms, default 1000, lets other goroutines report a last race): every test binary
# and every rollup process a test stops. The tests do not need it: a race found is reported
# when it happens, and the test that caused it fails. Set GORACE to keep the default.
GORACE ?= atexit_sleep_ms=0
export GORACE
# The packages with the longest runs, named first so that go test starts them first (it runs
# packages in the order named; ./... then adds the rest once): a long package started last
# would run alone at the end.
TEST_SLOW_FIRST := ./cmd/rollup ./web ./embedded ./watcher ./api ./retention ./metrics/totals \
	./internal/soak ./embedded/storage ./bulk ./cmd/rollup-bench ./recompute

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: test
test: ## Run every test of both modules and of the Kubernetes manifests with the race detector.
	go test -race -p $(TEST_PACKAGES_AT_ONCE) $(TEST_SLOW_FIRST) ./... ./embedded/...
	cd $(K8S_MODULE) && GOWORK=off go test -race ./...

.PHONY: test-embedded
test-embedded: ## Test the embedded module on its own (its go.mod only, no workspace).
	cd embedded && GOWORK=off go test -race ./...

.PHONY: test-k8s
test-k8s: ## Decode the Kubernetes manifests of deploy/k8s strictly with the official types.
	cd $(K8S_MODULE) && GOWORK=off go test -race ./...

.PHONY: test-service
test-service: ## Test the service module (everything but embedded/).
	go test -race ./...

.PHONY: lint
lint: tidy-lint ## Run golangci-lint on every module and check their go.mod/go.sum are tidy.
	@set -e; for m in $(MODULES); do echo "golangci-lint: $$m"; (cd $$m && $(GOBIN)/golangci-lint run ./...); done
	@echo "golangci-lint: $(K8S_MODULE)"; cd $(K8S_MODULE) && GOWORK=off $(GOBIN)/golangci-lint run ./...

.PHONY: tidy-lint
tidy-lint: ## Fail when go mod tidy would change a module's go.mod or go.sum.
	@set -e; for m in $(MODULES) $(K8S_MODULE); do (cd $$m && GOWORK=off go mod tidy); done
	git diff --exit-code -- go.mod go.sum embedded/go.mod embedded/go.sum $(K8S_MODULE)/go.mod $(K8S_MODULE)/go.sum

.PHONY: tools
tools: ## Install the pinned lint tools (golangci-lint, actionlint) and promtool (the alert rules' tests).
	test -x $(GOBIN)/golangci-lint && $(GOBIN)/golangci-lint version | grep -q $(patsubst v%,%,$(GOLANGCI_LINT_VERSION)) || \
		go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	test -x $(GOBIN)/promtool && go version -m $(GOBIN)/promtool | grep -q 'mod[[:space:]]*github.com/prometheus/prometheus[[:space:]]*$(PROMTOOL_VERSION)' || \
		go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)
	test -x $(GOBIN)/actionlint && $(GOBIN)/actionlint -version | grep -qx $(ACTIONLINT_VERSION) || \
		go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

.PHONY: actionlint
actionlint: ## Check the GitHub workflows (.github/workflows) with the pinned actionlint.
	$(GOBIN)/actionlint

.PHONY: spec
spec: ## Run MongoDB's spec suites against the embedded server; fail below embedded/spec-baseline.txt.
	.ci/spec

.PHONY: bench
# -timeout: BenchmarkBoundedStorage alone simulates 4 days of a 10,000-leaf project (about 12 min).
bench: ## Run the go test benchmarks of both modules (end to end: bin/rollup-bench; numbers go to docs/benchmarks.md).
	go test -run '^$$' -bench . -benchtime 1x -timeout 60m ./... ./embedded/...

.PHONY: build
build: ## Build the rollup binary and the benchmarks' (rollup-bench) into ./bin.
	go build -o bin/rollup ./cmd/rollup
	go build -o bin/rollup-bench ./cmd/rollup-bench
