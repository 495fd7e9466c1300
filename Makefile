# kclient: `make demo` and `make test` set up what they need (a .venv with the
# package installed editable plus its test, demo, docs and spark extras, and the
# JVM jars: Apache Kafka, ZooKeeper and Spark's Kafka connector from Maven
# Central into the ignored .cache/jvm/), then run. They need python3, make and
# Java 17+ (Spark, ZooKeeper, Kafka); without Java they stop at once with one
# line saying so (.ci/run installs openjdk-17-jre-headless when absent).

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Reinstall only when pyproject.toml changes (or the venv is new).
STAMP  := $(VENV)/.kclient-installed
# The jar cache (kclient.testing.maven): Kafka 4.x and 3.9, ZooKeeper, Spark's
# Kafka connector. Fetched by `make jvm` (mvn, or Maven itself from Maven
# Central when mvn is absent), again whenever a pom changes.
export KCLIENT_JVM_CACHE ?= $(CURDIR)/.cache/jvm
JVM_STAMP := $(KCLIENT_JVM_CACHE)/.fetched
POMS := $(wildcard kclient/testing/jvm/*/pom.xml)

.DEFAULT_GOAL := test
.PHONY: venv java jvm demo test test-pure docs bench clean

venv: $(STAMP)

# One line and a stop when Java 17+ is missing (nothing else is tried first).
java:
	@$(PYTHON) kclient/testing/maven.py --check-java

jvm: java venv $(JVM_STAMP)

$(JVM_STAMP): $(POMS)
	$(BIN)/python -m kclient.testing.maven
	@touch $@

$(STAMP): pyproject.toml setup.py kclient/_speedups.pyx
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,demo,docs,spark]'
	@touch $@

demo: java venv
	$(BIN)/python examples/flights.py

# pytest's own exit code is the target's: 1 for failures, 5 when no test was
# collected, so an empty run fails too. The suite runs in TEST_WORKERS
# pytest-xdist workers (most of its time is spent waiting on broker, Kafka
# and Spark processes, not on the CPU); --dist loadgroup keeps each module,
# and all the Apache Kafka and all the Spark tests, in one worker each
# (tests/conftest.py), so every shared process starts once. TEST_WORKERS=0
# runs it in one process.
TEST_WORKERS ?= 2
test: jvm
	$(BIN)/python -m pytest -q $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

# The modules whose code has a compiled twin in kclient/_speedups.pyx, again
# on the pure-Python path (KCLIENT_PURE_PYTHON=1): the record batch codecs,
# the producer (partitioner, ProducerData, queue, collation) and the
# consumer's decoding (fetcher, message sets, streams, statistics), plus the
# peers' interop matrix that decodes every codec and format. The rest of the
# suite (broker, controller, ZooKeeper, storage, tools, Spark, the Apache
# Kafka conformance suite) touches no compiled code; tests/test_speedups.py
# checks every compiled function against its pure twin on both runs.
PURE_TESTS := tests/test_speedups.py tests/test_protocol.py \
	tests/test_legacy_records.py tests/test_codecs.py tests/test_message_set.py \
	tests/test_message_set_next_offset.py tests/test_formats_broker.py \
	tests/test_producer.py tests/test_partitioner.py tests/test_delivery_results.py \
	tests/test_idempotent_producer.py tests/test_consumer_fetcher.py \
	tests/test_consumer_streams.py tests/test_consumer_statistics.py \
	tests/test_simple_consumer.py tests/test_consumer_connector.py \
	tests/test_interop.py tests/test_interop_matrix.py \
	tests/test_accumulator.py tests/test_accumulator_broker.py \
	tests/test_producer_buffer_memory.py

test-pure: jvm
	KCLIENT_PURE_PYTHON=1 $(BIN)/python -m pytest -q -m "not apache_kafka" $(PURE_TESTS)

docs: venv
	$(BIN)/mkdocs build --strict

# The bench extra (aiokafka, profilers) is installed on first use and again
# whenever pyproject.toml changes. BENCH_ARGS: e.g. --quick, --repeat 5.
bench: jvm
	@test $(VENV)/.kclient-bench-installed -nt pyproject.toml || { \
		$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[bench]' && \
		touch $(VENV)/.kclient-bench-installed; }
	$(BIN)/python benchmarks/run.py $(BENCH_ARGS)
	$(BIN)/python benchmarks/partitions.py --runs 3
	$(BIN)/python benchmarks/spark.py
	$(BIN)/python benchmarks/kafka_reference.py
	$(BIN)/python benchmarks/security.py
	$(BIN)/python benchmarks/cluster.py
	$(BIN)/python benchmarks/commit_latency.py
	$(BIN)/python benchmarks/descriptors.py 2048 --ulimit 1024

clean:
	rm -rf $(VENV) site build dist *.egg-info .pytest_cache .hypothesis kclient/_speedups.c kclient/_speedups*.so
	find . -path ./.git -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
