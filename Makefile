# actorlog task runner. `make demo` and `make test` do all their own set-up on a fresh
# Debian/Ubuntu machine: OS packages via apt when missing, a .venv, and the Python packages.

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Tests marked `slow` are long soaks, run by `make soak`, not by `make test`.
PYTEST_ARGS ?=
# `make test` installs ZooKeeper, Java (Spark), Prometheus and Chromium itself, so their tests must run
# there: a missing one fails the run instead of skipping.
REQUIRE := ACTORLOG_REQUIRE_ZK=1 ACTORLOG_REQUIRE_SPARK=1 ACTORLOG_REQUIRE_PROMETHEUS=1 ACTORLOG_REQUIRE_BROWSER=1
# The simulation's seeds decide everything only with a fixed hash seed (set iteration order): a
# seed that fails in the tests replays with `actorlog sim --seed N`, which fixes it the same way.
export PYTHONHASHSEED := 0
# `make sim SEEDS=10000 JOBS=2`: the long simulation campaign.
SEEDS ?= 10000
JOBS ?= 2
LINT_PATHS := runtime actors ops tests k8s/sync.py
# `make chaos`: the long fault campaign on real processes (CHAOS_SEEDS campaigns of CHAOS_FAULTS
# faults over CHAOS_DURATION seconds each), ending with its totals line. `make chaos-controls`: the
# negative controls, each of which must report a violation within CHAOS_CONTROL_SEEDS seeds.
CHAOS_SEEDS ?= 25
CHAOS_FAULTS ?= 40
CHAOS_DURATION ?= 120
CHAOS_CONTROL_SEEDS ?= 10
CONTROL := $(BIN)/actorlog verify run --seeds 1-$(CHAOS_CONTROL_SEEDS) --expect-violation

.PHONY: all setup os-packages venv fmt lint type test check demo soak bench bench-transport \
        bench-storage bench-producer bench-replication bench-failover bench-rollup bench-kafka-clients \
        bench-scale dashboards-check k8s-check sim chaos chaos-controls kafka-jars interop bench-vs-kafka clean

all: check

setup: os-packages venv

os-packages:
	@bash scripts/ensure-os-packages.sh

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (actorlog needs Python 3.11)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

fmt: venv
	$(BIN)/ruff format $(LINT_PATHS)
	$(BIN)/ruff check --fix $(LINT_PATHS)

lint: venv
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/lint-imports
	$(BIN)/python k8s/sync.py --check

type: venv
	$(BIN)/mypy

# The 25 slowest tests are listed at the end: where the 15-minute budget of `make test` goes.
# Two workers (pytest-xdist), one test file each at a time (module fixtures such as a shared
# three-broker cluster start once): most process tests wait on real time, not on the CPU. Files go
# out in collection order, which tests/conftest.py starts with the longest files
# (--no-loadscope-reorder: xdist would otherwise send the files with the most tests first).
TEST_WORKERS ?= 2
test: setup lint type
	$(REQUIRE) $(BIN)/pytest -m "not slow and not interop" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 $(PYTEST_ARGS)

check: test

demo: setup
	$(BIN)/actorlog demo
	@echo "The tools are in $(BIN): run them as $(BIN)/actorlog ..., or 'source $(BIN)/activate' first."

soak: setup
	$(REQUIRE) $(BIN)/pytest -m slow $(PYTEST_ARGS)

sim: venv
	$(BIN)/actorlog sim --seeds 1-$(SEEDS) --jobs $(JOBS)

chaos: setup
	$(BIN)/actorlog verify run --seeds 1-$(CHAOS_SEEDS) --faults $(CHAOS_FAULTS) \
		--duration $(CHAOS_DURATION) --dir actorlog-verify/chaos

chaos-controls: setup
	$(CONTROL) --acks 1 --dir actorlog-verify/control-acks-1
	$(CONTROL) --unclean --min-insync-replicas 1 --dir actorlog-verify/control-unclean
	$(CONTROL) --protocol-fault truncate-to-high-watermark --kinds kill-leaders-in-turn --faults 6 \
		--dir actorlog-verify/control-truncate

# Benchmarks print figures; none asserts a time. See README "Performance".
bench: bench-transport bench-storage bench-producer bench-replication bench-failover bench-rollup \
       bench-kafka-clients

bench-transport: venv
	$(BIN)/python -m ops.bench.transport

bench-storage: venv
	$(BIN)/python -m ops.bench.storage

bench-producer: setup
	$(BIN)/python -m ops.bench.producer

bench-replication: setup
	$(BIN)/python -m ops.bench.replication

bench-failover: setup
	$(BIN)/python -m ops.bench.failover

bench-rollup: setup
	$(BIN)/python -m ops.bench.rollup

bench-kafka-clients: setup
	$(BIN)/python -m ops.bench.kafka_clients

bench-scale: setup
	$(BIN)/python -m ops.bench.scale

dashboards-check: setup
	ACTORLOG_REQUIRE_PROMETHEUS=1 ACTORLOG_REQUIRE_ZK=1 $(BIN)/pytest -m prometheus tests/dashboards

k8s-check: venv
	$(BIN)/python k8s/sync.py --check
	$(BIN)/pytest -m k8s tests/k8s

# `make interop`: Apache Kafka's own Java tools (TopicCommand, the console producer and consumer,
# ProducerPerformance, GetOffsetShell) run against a real Kafka broker cluster (the harness's own
# check) and against `actorlog cluster up` (docs/interop.md). Kafka's jars come from Maven Central
# once (`make kafka-jars`, into KAFKA_LIB; a second run does nothing); `make test` needs neither
# Maven nor the jars.
KAFKA_VERSION ?= 3.9.2
KAFKA_LIB := build/kafka/$(KAFKA_VERSION)/lib
KAFKA_JARS := $(KAFKA_LIB)/.complete

$(KAFKA_JARS): tools/kafka/pom.xml
	@bash scripts/ensure-os-packages.sh maven
	rm -rf $(KAFKA_LIB) $(KAFKA_LIB).partial
	mvn -B -q -Dstyle.color=never -f tools/kafka/pom.xml -Dkafka.version=$(KAFKA_VERSION) \
		dependency:copy-dependencies -DoutputDirectory=$(abspath $(KAFKA_LIB)).partial
	mv $(KAFKA_LIB).partial $(KAFKA_LIB)
	@touch $@

kafka-jars: $(KAFKA_JARS)

interop: setup kafka-jars
	ACTORLOG_REQUIRE_INTEROP=1 ACTORLOG_KAFKA_LIB=$(abspath $(KAFKA_LIB)) \
		$(BIN)/pytest -m interop tests/interop --durations=10 $(PYTEST_ARGS)

# `make bench-vs-kafka`: actorlog beside a real Apache Kafka cluster on this machine, one after the
# other, the same workloads and tools (ops/bench/vs_kafka.py); one table, printed and written to
# build/bench-vs-kafka/. About 10 minutes on a quiet 2-core machine; run nothing else meanwhile.
# BENCH_ARGS='--workloads 100B-*' picks workloads, BENCH_ARGS=--quick checks that it works.
BENCH_ARGS ?=
bench-vs-kafka: setup kafka-jars
	ACTORLOG_KAFKA_LIB=$(abspath $(KAFKA_LIB)) $(BIN)/python -m ops.bench.vs_kafka $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build *.egg-info
