# rekey — see README.md.
SHELL := /usr/bin/env bash
GO ?= go
# -timeout is a hang guard, not a speed goal: at load 40 on 2 cores each end-to-end group ran past 80 minutes.
GOTESTFLAGS ?= -count=1 -timeout 180m
# cli-runtime (the plugin's kubectl flags and printers) pulls in kustomize,
# whose Go-plugin loader keeps the linker from dropping unused code: the
# tag makes kubectl-rekey 59.7 MB instead of 77.6 MB.
BUILDTAGS ?= kustomize_disable_go_plugin_support

.PHONY: all build test env demo bench reliability generate manifests vet fmt clean explore release release-check release-lock

all: build

## build: the manager and the kubectl plugin into bin/
build:
	$(GO) build -tags '$(BUILDTAGS)' -o bin/ ./cmd/...

## env: build or install what the tests run (cached in ~/.cache/rekey)
env:
	hack/env/setup.sh

## demo: rotate a live 3-instance MySQL cluster under client load with kubectl rekey
demo: env
	$(GO) build -tags '$(BUILDTAGS)' -o bin/ ./cmd/kubectl-rekey ./cmd/rekey-demo
	bin/rekey-demo --plugin bin/kubectl-rekey

## bench: speed goals as side-by-side ratios, every figure of docs/benchmarks.md (about an hour
## on a quiet 2-vCPU machine; run nothing beside it)
bench: env
	$(GO) test -run '^$$' -bench 'InstancePhases/instances=(1|9)/users=(8|64)/rtt=2ms' -benchtime 3x -timeout 60m ./test/bench/
	$(GO) test -run '^$$' -bench BatchedPhases -benchtime 1x -timeout 30m ./internal/backend/mysql/
	$(GO) test -run '^$$' -bench APIRequests -benchtime 5x -timeout 10m ./test/bench/
	$(GO) test -run '^$$' -bench 'RotationEndToEnd|LoginsUnderLoad' -benchtime 1x -timeout 60m ./test/bench/
	$(GO) test -run '^$$' -bench ManagerMemory -benchtime 2x -timeout 20m ./test/bench/
	$(GO) test -run '^$$' -bench Scale -benchtime 1x -timeout 45m ./test/bench/
	REKEY_BENCH_SETS=1000 REKEY_BENCH_BATCH=100 $(GO) test -run '^$$' -bench BlackHole -benchtime 1x -timeout 60m ./test/bench/

## reliability: the MySQL and PostgreSQL fault matrix on real servers, then the state-space explorer, run on a clean
## checkout of HEAD (edits not committed are not tested); regenerates docs/reliability.md naming that commit. The test
## log is kept in bin/reliability.log.
MATRIX_RUN := ^(TestPodConsumersSeeLockouts|TestDeletion|TestDeletionCrashSafety|TestPausedLeaderIsFenced|TestPausedLeaderStaleReset|TestPausedLeaderMySQLApply|TestPausedLeaderPostgres|TestPausedLeaderRabbitMQ|TestKilledLeaderTakeover|TestAPIConflicts|TestCrashSafety|TestSwitchoverMidRotation|TestAbortAndRecover|TestRefusalsAndHealthGate|TestPendingTampering|TestPendingAltered|TestMySQLFullCycle|TestReinitReplicaMidRotation|TestInstanceStoppedMidPhase|TestPostgresCrashSafety|TestPostgresLoginTargets)$$
reliability: env
	@set -u; commit=$$(git rev-parse HEAD); subject=$$(git log -1 --format=%s HEAD); \
	tree=$$(mktemp -d "$${TMPDIR:-/tmp}/rekey-reliability-XXXXXX"); trap 'rm -rf "$$tree"' EXIT; \
	git archive "$$commit" | tar -x -C "$$tree"; \
	mkdir -p bin && rm -f bin/matrix.jsonl; \
	echo "fault matrix on a clean checkout of $$commit (log: bin/reliability.log)"; \
	status=0; \
	(cd "$$tree" && REKEY_MATRIX_OUT=$(CURDIR)/bin/matrix.jsonl $(GO) test -v $(GOTESTFLAGS) ./test/e2e/ -run '$(MATRIX_RUN)') \
	  > bin/reliability.log 2>&1 || status=1; \
	rm -f bin/explore.jsonl; \
	(cd "$$tree" && REKEY_EXPLORE_OUT=$(CURDIR)/bin/explore.jsonl $(GO) test -v $(GOTESTFLAGS) ./internal/explorer/) \
	  >> bin/reliability.log 2>&1 || status=1; \
	grep -E '^(--- |ok|FAIL|panic)' bin/reliability.log || true; \
	(cd "$$tree" && $(GO) run ./hack/reliability -in $(CURDIR)/bin/matrix.jsonl -out $(CURDIR)/docs/reliability.md \
	  -commit "$$commit" -subject "$$subject" \
	  -command "make reliability (on a clean checkout of the commit: REKEY_MATRIX_OUT=bin/matrix.jsonl go test -v $(GOTESTFLAGS) ./test/e2e/ -run '$(MATRIX_RUN)')" \
	  -explore $(CURDIR)/bin/explore.jsonl \
	  -explore-command "make reliability (after the matrix, on the same checkout: REKEY_EXPLORE_OUT=bin/explore.jsonl go test -v $(GOTESTFLAGS) ./internal/explorer/)") \
	  || status=1; \
	exit $$status

## test: prepare the environment if needed, then run every test against real servers
# Five test processes run side by side: the fault matrix, the Ceph (but CSI) and
# RabbitMQ end-to-end tests, the slowest MySQL end-to-end tests, the rest of the
# end-to-end suite, and every other package (two at a time). The end-to-end
# processes are the longest and mostly wait on real servers (each has its own
# API server and servers, and runs its tests one after another), so splitting
# them uses the cores the other packages leave idle. The explorer is CPU-bound:
# run as two processes beside them it took longer, not shorter (1,855 and
# 1,727 s in CI against 1,127 s as one).
E2E_PKG := ./test/e2e/
# The four end-to-end processes run one test binary, built once (bin/e2e.test,
# with GOTESTFLAGS' build flags) and run in the package's folder as go test
# would run it, with E2E_TESTFLAGS: four go test commands each compiled, vetted
# and linked the same package, 47 CPU-s against 15 for one build after an edit
# of the suite (measured side by side; the link alone is ~9 CPU-s each). The
# suite's vet checks run in make vet (go vet ./...), as before.
E2E_TESTFLAGS ?= -test.count=1 -test.timeout=180m
# The Ceph CSI tests run with the rest of the suite: with them this process
# was the longest of the three (42 of make test's 44 min in CI).
BACKENDS_RUN := ^(TestCeph(AdminRotationCrash|CapsPromise|Deletion|InPlace|InPlaceAdopt|InPlaceCrashThenAbort|InPlaceHandRotated|InPlaceRotationIDTakenAgain|NoLockout|Overlapping|OverlappingHandRotated|RotationPolicies)|TestAdmissionCeph(HostileValues|RabbitMQPolicies)|TestRabbitMQ.*|TestAdmissionRabbitMQ.*|TestOsloMessagingRPC|TestPausedLeaderCeph)$$
# The slowest tests of the rest (they wait on paced rollouts, switchovers and
# the held deletion's requeues): about half its time, in a process of their own
# (it was make test's longest, 34 of its 35 min in CI).
SLOW_RUN := ^(TestMOCOPacedRollout|TestMOCOSwitchoverMidRotation|TestDeletionHeldRepairs|TestScaleUpMidRotation|TestDeletePolicyRepairsWhileInUse|TestMySQLTwoSetsOneCluster|TestMySQLUserListedMidRotation|TestScaleInThenOut)$$
test: env vet
	@mkdir -p bin; rm -f bin/explore.jsonl bin/e2e.test; status=0; \
	$(GO) test -c -o bin/e2e.test $(GOTESTFLAGS) $(E2E_PKG) || status=1; \
	run_e2e() { if [ ! -x bin/e2e.test ]; then echo "FAIL: the end-to-end test binary did not build"; return 1; fi; \
	  (cd $(E2E_PKG) && exec $(CURDIR)/bin/e2e.test -test.paniconexit0 $(E2E_TESTFLAGS) "$$@"); \
	  rc=$$?; [ $$rc = 0 ] && echo "ok  	$(E2E_PKG)" || echo "FAIL	$(E2E_PKG) (exit $$rc)"; return $$rc; }; \
	run_e2e -test.run '$(MATRIX_RUN)' > bin/test-matrix.log 2>&1 & matrix=$$!; \
	run_e2e -test.run '$(BACKENDS_RUN)' > bin/test-e2e-backends.log 2>&1 & backends=$$!; \
	run_e2e -test.run '$(SLOW_RUN)' > bin/test-e2e-slow.log 2>&1 & slow=$$!; \
	run_e2e -test.skip '$(MATRIX_RUN)|$(BACKENDS_RUN)|$(SLOW_RUN)' > bin/test-e2e.log 2>&1 & e2e=$$!; \
	REKEY_EXPLORE_OUT=$(CURDIR)/bin/explore.jsonl $(GO) test $(GOTESTFLAGS) $$($(GO) list ./... | grep -v '/test/e2e$$') || status=1; \
	echo "--- what the state-space explorer covered (internal/explorer):"; \
	$(GO) run ./hack/reliability -explore-summary bin/explore.jsonl || status=1; \
	wait $$e2e || status=1; \
	echo "--- the end-to-end suite but the slowest MySQL tests, the fault matrix and the Ceph and RabbitMQ tests below (go test $(E2E_PKG) -skip '$(MATRIX_RUN)|$(BACKENDS_RUN)|$(SLOW_RUN)'):"; \
	cat bin/test-e2e.log; \
	wait $$slow || status=1; \
	echo "--- the slowest MySQL end-to-end tests (go test $(E2E_PKG) -run '$(SLOW_RUN)'):"; \
	cat bin/test-e2e-slow.log; \
	wait $$backends || status=1; \
	echo "--- the Ceph and RabbitMQ end-to-end tests but Ceph CSI (go test $(E2E_PKG) -run '$(BACKENDS_RUN)'):"; \
	cat bin/test-e2e-backends.log; \
	wait $$matrix || status=1; \
	echo "--- the fault matrix (go test $(E2E_PKG) -run '$(MATRIX_RUN)'):"; \
	cat bin/test-matrix.log; \
	exit $$status

vet:
	$(GO) vet ./...

## explore: the state-space explorer (internal/explorer) for as long as asked,
## printing the states, transitions, depth and invariant checks it covered.
## make test runs it for under a minute; REKEY_EXPLORE_STALE=1 adds
## reconciles from a stale read of the set, REKEY_EXPLORE_SCALING=0 leaves
## out instances that scale in and return, REKEY_EXPLORE_SWITCHOVER=0
## switchovers, REKEY_EXPLORE_SPECEDITS=0 spec edits (users, instances and
## consumers removed from the spec and listed again).
EXPLORE_SECONDS ?= 600
EXPLORE_DEPTH ?= 9
EXPLORE_WALKS ?= 500
explore:
	REKEY_EXPLORE_SECONDS=$(EXPLORE_SECONDS) REKEY_EXPLORE_DEPTH=$(EXPLORE_DEPTH) REKEY_EXPLORE_WALKS=$(EXPLORE_WALKS) \
	  $(GO) test -v -count=1 -timeout 0 ./internal/explorer/ -run '^TestExplore$$'

## generate: CRD manifests and deepcopy code from the API types
generate:
	cd hack/tools/codegen && $(GO) tool controller-gen object paths=$(CURDIR)/api/... \
	  crd:allowDangerousTypes=false paths=$(CURDIR)/api/... output:crd:dir=$(CURDIR)/config/crd/bases
	cp config/crd/bases/rekey.io_credentialsets.yaml charts/rekey/crds/

fmt:
	gofmt -l -w $$(git ls-files '*.go')

clean:
	rm -rf bin/

## image: the manager's OCI image as bin/rekey-image.tar, no registry or container engine needed: the manager
## built statically plus the ceph CLI and its libraries from the test environment's pinned Debian sid root
## (~/.cache/rekey/sid, made by `make env`). See docs/image.md; the Dockerfile builds the same for a registry.
IMAGE_ROOT ?= $(HOME)/.cache/rekey/sid
IMAGE_REF ?= rekey:dev
IMAGE_PACKAGES := python3-rados,python3-ceph-argparse,python3-prettytable
IMAGE_EXCLUDE := debconf,adduser,perl-base,dpkg,tzdata,readline-common,media-types,netbase
image:
	@test -f $(IMAGE_ROOT)/var/lib/dpkg/status || { echo "no Debian root at $(IMAGE_ROOT): run make env"; exit 1; }
	mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/rekey-image-manager ./cmd/manager
	$(GO) run ./hack/image -root $(IMAGE_ROOT) -manager bin/rekey-image-manager -out bin/rekey-image.tar \
	  -ref $(IMAGE_REF) -packages $(IMAGE_PACKAGES) -exclude $(IMAGE_EXCLUDE) -files /usr/bin/ceph,/lib64/ld-linux-x86-64.so.2 \
	  -list bin/rekey-image.packages

## release: what a release publishes, into bin/release/ (see docs/image.md): the manager image for linux/amd64 and
## linux/arm64 as one OCI image index (layout directory and oci-archive, built with go-containerregistry) with an
## SPDX SBOM per image, the chart packaged with that index as its default image, the kubectl-rekey archives and
## their krew manifest, SHA256SUMS. Built from a clean checkout of HEAD (edits not committed are not in it) with
## SOURCE_DATE_EPOCH the commit's time, so two runs give the same bytes. Needs no root, registry or container
## engine; the Debian packages are the ones pinned in hack/release/debian.lock (downloaded once to ~/.cache/rekey/debs).
## make release-check proves it (test/release); it is not part of make test.
RELEASE_VERSION ?=
RELEASE_OUT ?= bin/release
release:
	@set -eu; commit=$$(git rev-parse HEAD); \
	tree=$$(mktemp -d "$${TMPDIR:-/tmp}/rekey-release-XXXXXX"); trap 'rm -rf "$$tree"' EXIT; \
	git archive "$$commit" | tar -x -C "$$tree"; \
	cd "$$tree/hack/release" && $(GO) run . -src "$$tree" -out "$(abspath $(RELEASE_OUT))" -revision "$$commit" \
	  -epoch "$$(git -C "$(CURDIR)" log -1 --format=%ct "$$commit")" \
	  $(if $(RELEASE_VERSION),-version $(RELEASE_VERSION)) $(if $(SID_MIRROR),-mirror $(SID_MIRROR))

## release-check: checks the build in bin/release (make release first) with test/release: the index names linux/amd64
## and linux/arm64 and every ELF file of each image is of its architecture, each SBOM lists the manager's Go modules and
## the image's Debian packages, the packaged chart renders the built index, every krew sha256 is its archive's and each
## archive's binary is of its platform, the plugin prints the release's version and commit; then it builds HEAD again
## into bin/release-again and checks every file is byte-identical. Needs make env (helm). Not in make test: a cold
## release build cross-compiles for six platforms (5 to 40 minutes each at load); warm, the second took 870 s at load 45.
release-check:
	$(MAKE) release RELEASE_OUT=bin/release-again
	REKEY_RELEASE_DIR=$(CURDIR)/bin/release REKEY_RELEASE_AGAIN=$(CURDIR)/bin/release-again \
	  $(GO) test -count=1 -v -tags release ./test/release/

## release-lock: resolve the image's Debian packages again from the mirror's signed index (hack/release/debian.lock)
release-lock:
	cd hack/release && $(GO) run . -update-lock -lock "$(CURDIR)/hack/release/debian.lock" $(if $(SID_MIRROR),-mirror $(SID_MIRROR))
