GOLANGCI_LINT_VERSION := v2.6.2
# promtool of Prometheus v3.16.0 (the module is versioned v0.3XX.Y for v3.XX.Y); the compose
# file's prom/prometheus image is the same release. remove_all_sd leaves out the service
# discovery plugins promtool does not need here (half the modules, half the build time).
PROMTOOL_VERSION := v0.316.0
GOBIN ?= $(shell go env GOPATH)/bin

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: test
test: ## Run every test with the race detector.
	go test -race ./...

.PHONY: lint
lint: tidy-lint ## Run golangci-lint and check go.mod/go.sum are tidy.
	$(GOBIN)/golangci-lint run ./...

.PHONY: tidy-lint
tidy-lint: ## Fail when go mod tidy would change go.mod or go.sum.
	go mod tidy
	git diff --exit-code -- go.mod go.sum

.PHONY: tools
tools: ## Install the pinned lint tool and promtool (the alert rules' tests).
	test -x $(GOBIN)/golangci-lint && $(GOBIN)/golangci-lint version | grep -q $(patsubst v%,%,$(GOLANGCI_LINT_VERSION)) || \
		go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	test -x $(GOBIN)/promtool && go version -m $(GOBIN)/promtool | grep -q 'mod[[:space:]]*github.com/prometheus/prometheus[[:space:]]*$(PROMTOOL_VERSION)' || \
		go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)

.PHONY: bench
bench: ## Run the benchmarks (numbers go to docs/benchmarks.md).
	go test -run '^$$' -bench . -benchtime 1x ./...

.PHONY: build
build: ## Build the rollup binary into ./bin.
	go build -o bin/rollup ./cmd/rollup
