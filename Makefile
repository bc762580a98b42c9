# Tests run against a real ZooKeeper started by the zktest package; `make test`
# installs one first (see scripts/install-zookeeper.sh) so a fresh checkout
# just works.

GO ?= go

.PHONY: test torture zk demo container

# -p 1: one package's test binary at a time. Each package starts its own
# ZooKeeper JVMs and the tests rely on 1s session timeouts; running packages
# side by side on a small (2-core) machine starves them.
test: zk
	$(GO) vet ./...
	$(GO) test -race -count=1 -p 1 -timeout 15m ./...

# torture runs the long profile of the randomized fault torture (TestTorture;
# `make test` runs a one-minute profile). A failing run prints its seed:
# replay it with TORTURE_ARGS='-torture.seed=N ...'.
TORTURE_ARGS ?= -torture.duration=30m -torture.clients=24
torture: zk
	$(GO) test -race -count=1 -run '^TestTorture$$' -timeout 0 -v . -args $(TORTURE_ARGS)

# zk installs ZooKeeper and Java if they are missing.
zk:
	./scripts/install-zookeeper.sh

# demo builds bin/zklock, starts a throwaway ZooKeeper and shows the lock at
# work (installs ZooKeeper first if it is missing). A newcomer's first command.
demo:
	@./scripts/demo.sh

# container builds the Docker fallback of the test harness (a module of its
# own, so testcontainers-go stays out of zklock's dependencies).
container:
	cd zktest/zkcontainer && $(GO) vet ./... && $(GO) build ./...
