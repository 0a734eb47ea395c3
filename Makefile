GOLANGCI_LINT_VERSION := v2.6.2
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
tools: ## Install the pinned lint tool.
	test -x $(GOBIN)/golangci-lint && $(GOBIN)/golangci-lint version | grep -q $(patsubst v%,%,$(GOLANGCI_LINT_VERSION)) || \
		go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: spec
spec: ## Run MongoDB's spec suites against the embedded server; fail below embedded/spec-baseline.txt.
	.ci/spec

.PHONY: bench
bench: ## Run the benchmarks (numbers go to docs/benchmarks.md).
	go test -run '^$$' -bench . -benchtime 1x ./...

.PHONY: build
build: ## Build the rollup binary into ./bin.
	go build -o bin/rollup ./cmd/rollup
