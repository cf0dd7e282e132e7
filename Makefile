# rekey — see README.md.
SHELL := /usr/bin/env bash
GO ?= go
GOTESTFLAGS ?= -count=1 -timeout 60m

.PHONY: all build test env demo bench reliability generate manifests vet fmt clean

all: build

## build: the manager and the kubectl plugin into bin/
build:
	$(GO) build -o bin/ ./cmd/...

## env: build or install what the tests run (cached in ~/.cache/rekey)
env:
	hack/env/setup.sh

## demo: rotate a live 3-instance MySQL cluster under client load with kubectl rekey
demo: env
	$(GO) build -o bin/ ./cmd/kubectl-rekey ./cmd/rekey-demo
	bin/rekey-demo --plugin bin/kubectl-rekey

## bench: speed goals as side-by-side ratios (see docs/benchmarks.md)
bench: env
	$(GO) test -run '^$$' -bench 'InstancePhases' -benchtime 3x -timeout 30m ./test/bench/
	$(GO) test -run '^$$' -bench 'RotationEndToEnd|LoginsUnderLoad|Scale' -benchtime 1x -timeout 60m ./test/bench/

## reliability: the MySQL fault matrix on real servers; regenerates docs/reliability.md from its results
MATRIX_RUN := ^(TestAPIConflicts|TestCrashSafety|TestSwitchoverMidRotation|TestAbortAndRecover|TestRefusalsAndHealthGate|TestPendingTampering|TestPendingAltered|TestMySQLFullCycle|TestReinitReplicaMidRotation|TestInstanceStoppedMidPhase)$$
reliability: env
	mkdir -p bin && rm -f bin/matrix.jsonl
	REKEY_MATRIX_OUT=$(CURDIR)/bin/matrix.jsonl $(GO) test $(GOTESTFLAGS) ./test/e2e/ -run '$(MATRIX_RUN)'; status=$$?; \
	$(GO) run ./hack/reliability -in bin/matrix.jsonl -out docs/reliability.md -rev "$$(git describe --always --dirty)" \
	  -command "make reliability (REKEY_MATRIX_OUT=bin/matrix.jsonl go test $(GOTESTFLAGS) ./test/e2e/ -run '$(MATRIX_RUN)')" || status=1; \
	exit $$status

## test: prepare the environment if needed, then run every test against real servers
test: env vet
	$(GO) test $(GOTESTFLAGS) ./...

vet:
	$(GO) vet ./...

## generate: CRD manifests and deepcopy code from the API types
generate:
	cd hack/tools/codegen && $(GO) tool controller-gen object paths=$(CURDIR)/api/... \
	  crd:allowDangerousTypes=false paths=$(CURDIR)/api/... output:crd:dir=$(CURDIR)/config/crd/bases
	cp config/crd/bases/rekey.io_credentialsets.yaml charts/rekey/crds/

fmt:
	gofmt -l -w $$(git ls-files '*.go')

clean:
	rm -rf bin/
