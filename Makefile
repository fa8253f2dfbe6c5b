# One Makefile for the whole platform. `make help` lists the targets.
# The first command a newcomer runs is `make demo`; the second is `make test`.

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV        ?= .venv
PY_BOOT     ?= python3
PYTHON      := $(VENV)/bin/python
STACK       := $(PYTHON) -m revenue_platform.local_stack
INSTALLED   := $(VENV)/.installed
# One stamp per JAVA_HOME: the driver's class archive is per JDK, so a driver JDK chosen with
# JAVA_HOME (docs/local-stack.md) gets its archive from the first target that needs the jars.
# (A checksum of the path, so a JAVA_HOME with spaces or quotes still names one file.)
JVM_STAMP   := .jvm/.fetched$(if $(JAVA_HOME),-$(shell printf '%s' '$(subst ','"'"',$(JAVA_HOME))' | cksum | cut -d' ' -f1))
OBJECT_STORE_STAMP := .jvm/.object-store-fetched
PYTEST_ARGS ?=
# The import map of docs/architecture.md, as tests (run by `make lint`): the layers of the project,
# spark_apps' own floors, and its contract package importing without pyspark.
IMPORT_CONTRACTS := tests/unit/project/test_import_contracts.py tests/unit/spark_apps/test_package_layers.py \
	tests/unit/spark_apps/contract/test_contract_without_pyspark.py
# The project's code on sys.path for every Python that make starts (the venv's .pth file
# does the same for Pythons started outside make, e.g. by Airflow or spark-submit).
export PYTHONPATH := $(CURDIR):$(CURDIR)/include

# `make test` runs the suite on this many pytest-xdist workers (whole modules each; 0 runs it in one
# process). The 2 cores sit idle half the time of one session's run, waiting on drivers and brokers.
TEST_WORKERS ?= 2
# Each worker's own broker and object store (see tests/conftest.py: worker N's ports are 1000 * N
# up, its state in .local/test/gwN), stopped after every run in case pytest itself was killed, also
# those of a worker that replaced a stalled one (tests/stall_watchdog.py: gw2 and up).
TEST_STATE_ROOT = $${TEST_STATE_DIR:-$(CURDIR)/.local/test}
TEST_WORKER_STATE = $(TEST_STATE_ROOT)$$( (( worker )) && echo /gw$$worker)
TEST_KAFKA_ENV := KAFKA_PORT=$$(( $${TEST_KAFKA_PORT:-19092} + 1000 * worker )) KAFKA_CONTROLLER_PORT=$$(( $${TEST_KAFKA_CONTROLLER_PORT:-19093} + 1000 * worker )) KAFKA_DATA_DIR=$(TEST_WORKER_STATE)/kafka
TEST_OBJECT_STORE_ENV := OBJECT_STORE_PORT=$$(( $${TEST_OBJECT_STORE_PORT:-19400} + 1000 * worker )) OBJECT_STORE_DATA_DIR=$(TEST_WORKER_STATE)/object-store
# The fault tests' own cluster (see tests/cluster/conftest.py): ports from 19100, state in .local/test/cluster.
TEST_CLUSTER_ENV := PLATFORM_STATE_DIR=$(TEST_STATE_ROOT) CLUSTER_BASE_PORT=$${TEST_CLUSTER_BASE_PORT:-19100}

.PHONY: help
help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(INSTALLED): requirements.txt requirements-dev.txt constraints.txt
	@$(PY_BOOT) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Python 3.11 is required (found %d.%d); set PY_BOOT=/path/to/python3.11" % sys.version_info[:2])'
	@test -x $(PYTHON) || $(PY_BOOT) -m venv $(VENV)
	@echo "[install] Python packages into $(VENV) (pinned by constraints.txt) ..."
	@# uv (pinned in constraints.txt) installs the rest: same pins, half of pip's time on a fresh .venv.
	@$(PYTHON) -m pip install --quiet --disable-pip-version-check -c constraints.txt uv
	@$(VENV)/bin/uv pip install --quiet --python $(PYTHON) -r requirements.txt -r requirements-dev.txt -c constraints.txt
	@# pyspark-client (pulled by the Spark provider) shares pyspark's package folder: versions must match.
	@$(PYTHON) -c 'from importlib.metadata import version as v; a, b = v("pyspark"), v("pyspark-client"); assert a == b, f"pyspark {a} != pyspark-client {b}"'
	@# A .pth file puts the repo root (spark_apps) and include/ (revenue_platform) on sys.path.
	@site=$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	  printf '%s\n%s\n' "$(CURDIR)" "$(CURDIR)/include" > "$$site/orders_revenue_platform.pth"
	@touch $@

.PHONY: install
install: $(INSTALLED) ## Create .venv and install the pinned Python packages

# The order validator's JVM fast path (Java beside the data plane it serves, spark_apps/jvm/): compiled
# by `make jvm` into .jvm/spark-jars/order-validator.jar. The poms stay in include/jvm/.
ORDER_VALIDATOR_SOURCES := $(shell find spark_apps/jvm/order-validator/src -name '*.java')

$(JVM_STAMP): $(INSTALLED) include/jvm/kafka-broker/pom.xml include/jvm/kafka-tools/pom.xml include/jvm/spark-connectors/pom.xml $(ORDER_VALIDATOR_SOURCES) spark_apps/class_archive_training_job.py include/revenue_platform/local_stack/class_archive.py spark_apps/engine/session.py
	@$(STACK) jvm
	@touch $@

.PHONY: jvm
jvm: $(JVM_STAMP) ## Fetch the Kafka broker and CLI tools, Spark Kafka connector and Delta jars with Maven into .jvm/; compile the order validator's fast path; write the Spark driver's class archive

$(OBJECT_STORE_STAMP): $(INSTALLED) include/jvm/object-store/pom.xml include/jvm/spark-s3/pom.xml
	@$(STACK) object-store-jars
	@touch $@

.PHONY: object-store-jars
object-store-jars: $(OBJECT_STORE_STAMP) ## Fetch the local S3 server (S3Proxy) and Spark's S3A jars (hadoop-aws) with Maven into .jvm/

.PHONY: objectstore-up objectstore-down
objectstore-up: object-store-jars ## Start a local S3-compatible object store on 127.0.0.1:9400 (bucket `lake`; docs/object-store.md)
	@$(STACK) objectstore-up
objectstore-down: ## Stop the local object store; keeps its buckets
	@if [ -x $(PYTHON) ]; then $(STACK) objectstore-down; else echo "nothing to stop (not installed)"; fi

.PHONY: check
check: $(INSTALLED) ## Check prerequisites (Java 17+, Maven)
	@$(STACK) check

.PHONY: up
up: jvm ## Start the local stack: Kafka (KRaft) on :9092 and Airflow on :8080
	@$(STACK) up

.PHONY: down
down: ## Stop the local stack (streaming apps, Airflow, Kafka); keeps data
	@if [ -x $(PYTHON) ]; then $(STACK) down; else echo "nothing to stop (not installed)"; fi

.PHONY: status
status: $(INSTALLED) ## Show what of the local stack is running
	@$(STACK) status

.PHONY: cluster-up cluster-down
# The cluster's lake is on an S3 object store of its own (S3Proxy's jars needed too) unless
# CLUSTER_LAKE=local keeps it in .local/cluster/lake.
CLUSTER_LAKE_JARS := $(if $(filter local,$(CLUSTER_LAKE)),,object-store-jars)
cluster-up: jvm $(CLUSTER_LAKE_JARS) ## Start a cluster on this machine: Spark master + 2 workers (:7077), 3 KRaft brokers (:9192-9194), its lake on its own S3 store (:9420), Airflow on it; CLUSTER_LAKE=local keeps the lake on local disk
	@$(STACK) cluster-up
cluster-down: ## Stop the cluster (streaming apps, Airflow, Spark workers and master, brokers, its object store); keeps data
	@if [ -x $(PYTHON) ]; then $(STACK) cluster-down; else echo "nothing to stop (not installed)"; fi

.PHONY: kafka-up kafka-down airflow-up airflow-down
kafka-up: jvm ## Start only the local Kafka broker
	@$(STACK) kafka-up
kafka-down: ## Stop only the local Kafka broker
	@$(STACK) kafka-down
airflow-up: jvm ## Start only local Airflow (standalone)
	@$(STACK) airflow-up
airflow-down: ## Stop only local Airflow
	@$(STACK) airflow-down

.PHONY: airflow
airflow: $(INSTALLED) ## Run the Airflow CLI against the local stack: make airflow CMD="dags list"
	@$(STACK) airflow $(CMD)

.PHONY: kafka
kafka: jvm ## Run Kafka's CLI tools against the local broker: make kafka CMD="kafka-consumer-groups --describe --all-groups"
	@$(STACK) kafka $(CMD)

.PHONY: demo
demo: up ## Run the platform end to end on the local stack and print windowed revenue
	@$(PYTHON) -m revenue_platform.demo

.PHONY: browser
browser: $(INSTALLED) ## Install Debian's chromium for the browser test (apt-get, only when missing)
	@$(STACK) browser

.PHONY: promtool
promtool: $(INSTALLED) ## Unpack promtool from Debian's prometheus package into .tools/ for the alert rule tests (only when missing)
	@$(STACK) promtool

.PHONY: release
release: $(INSTALLED) ## Publish an app version; starts its blue-green replay: make release VERSION=2.1.0 [CONFIG='{...}']
	@$(if $(VERSION),,$(error VERSION is required: make release VERSION=2.1.0 [CONFIG='{"kafka.max_offsets_per_trigger": 20000}'] [REQUIRE_APPROVAL=false] [NOTES=...]))
	@# VERSION, CONFIG, REQUIRE_APPROVAL and NOTES reach Python through the environment (make exports
	@# command-line variables), so no shell command is built from them.
	@$(PYTHON) -m revenue_platform.bluegreen.release

.PHONY: test
test: jvm object-store-jars browser promtool ## Run all tests (DAG integrity, unit, integration against real Kafka/Spark/Airflow) on TEST_WORKERS (2) workers
	@[[ "$(TEST_WORKERS)" =~ ^[0-9]+$$ ]] || { echo "TEST_WORKERS=$(TEST_WORKERS): give a number of workers (0: the suite in one process, e.g. for --pdb)" >&2; exit 2; }
	@status=0; $(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS) || status=$$?; \
	  for worker in $$( { seq 0 $$(( $(TEST_WORKERS) > 1 ? $(TEST_WORKERS) - 1 : 0 )); \
	      ls -d $(TEST_STATE_ROOT)/gw* 2>/dev/null | sed 's/.*gw//'; } | sort -un); do \
	    $(TEST_KAFKA_ENV) $(STACK) kafka-down >/dev/null 2>&1 || true; \
	    $(TEST_OBJECT_STORE_ENV) $(STACK) objectstore-down >/dev/null 2>&1 || true; \
	  done; \
	  exit $$status

.PHONY: test-fast
test-fast: $(INSTALLED) object-store-jars promtool ## The inner loop: unit + DAG tests that start no JVM, broker or Airflow DB (~2 min; make test runs everything; fetches the S3A jars once, which two launch-command tests read)
	@$(PYTHON) -m pytest --fast -q tests/unit tests/dags $(PYTEST_ARGS)

.PHONY: test-cluster
test-cluster: jvm object-store-jars ## Fault tests on a cluster of its own with its lake store (broker, worker, driver and object store kills); starts and stops it
	@status=0; $(PYTHON) -m pytest -m cluster tests/cluster $(PYTEST_ARGS) || status=$$?; \
	  $(TEST_CLUSTER_ENV) $(STACK) cluster-down >/dev/null 2>&1 || true; \
	  exit $$status

.PHONY: soak
soak: jvm $(CLUSTER_LAKE_JARS) ## Not in CI: 1,000,000 orders on the cluster, 20 random driver SIGKILLs + a broker restart; prints lost/doubled cents
	@$(PYTHON) -m bench.soak $(SOAK_ARGS)

.PHONY: bench bench-quick bench-cluster bench-object-store bench-gold-history bench-month-two bench-log-length soak-live
bench: jvm ## Benchmark on its own broker (:23092): 2M-order replay vs raw and work-equivalent ceilings, live latency, memory
	@$(PYTHON) -m bench
bench-quick: jvm ## The benchmark's small variant (100k orders, live 1k/5k per s; 5-15 min)
	@$(PYTHON) -m bench --quick
bench-gold-history: $(INSTALLED) ## One live gold batch after 1, 3 and 30 days of history, hourly layout vs unpartitioned: wall, rows and bytes written (~5 min, no Spark)
	@$(PYTHON) -m bench.gold_history $(GOLD_HISTORY_ARGS)
bench-month-two: jvm ## Not in CI: the live app at 5,000/s on a lake seeded with 1 day, then 30 days of history (logs included), lake maintenance beside it, then the quality suite; per-batch wall, bytes, restart, memory, their ratios (~10 min, ~0.1 GB)
	@$(PYTHON) -m bench --quick --phases month_two --rates '' --live-seconds 120 --warmup-seconds 30 $(MONTH_TWO_ARGS)
soak-live: jvm ## Not in CI: the live app at 2,000/s for 2 hours, lake maintenance every 20 min beside it (gold keeps superseded files 1 h); latency, batch wall, disk, memory and state per 10-min slice (SOAK_LIVE_ARGS, e.g. --soak-minutes 30)
	@$(PYTHON) -m bench --quick --phases soak_live --rates '' --soak-gold-retention-hours 1 $(SOAK_LIVE_ARGS)
bench-log-length: jvm ## One Delta commit (Spark's append, its history read, delta-rs's open + append) with 0 to 30 days of log entries (~10 min, ~5 GB)
	@$(PYTHON) -m bench.delta_log_length $(LOG_LENGTH_ARGS)
bench-object-store: jvm object-store-jars ## Not in CI: replay + live 20,000/s with the lake on local disk, then on an S3 server (:23400); the ratios
	@$(PYTHON) -m bench --lake both --phases replay,live --no-airflow $(or $(LAKE_BENCH_ARGS),--orders 500000 --rates 20000)
bench-cluster: jvm ## Not in CI: on a cluster of its own (:23100), replay 1,000,000 orders with 1 worker, then 2; records/s and their ratio
	@$(PYTHON) -m bench.cluster_scaling $(CLUSTER_BENCH_ARGS)

.PHONY: lint
lint: $(INSTALLED) ## ruff (incl. Airflow AIR rules), ruff format check, mypy, import contracts
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@$(VENV)/bin/mypy
	@$(PYTHON) -m pytest -q -p no:cacheprovider --no-header $(IMPORT_CONTRACTS)

.PHONY: import-contracts
import-contracts: $(INSTALLED) ## Check that imports only run down the layers (docs/architecture.md)
	@$(PYTHON) -m pytest -q -p no:cacheprovider --no-header $(IMPORT_CONTRACTS)

.PHONY: fmt
fmt: $(INSTALLED) ## Format and auto-fix with ruff
	@$(VENV)/bin/ruff format .
	@$(VENV)/bin/ruff check --fix .

.PHONY: ci
ci: lint test ## What CI runs: lint, then the whole test suite

.PHONY: lock
lock: ## Re-resolve requirements*.txt and rewrite constraints.txt
	@rm -rf .venv-lock && $(PY_BOOT) -m venv .venv-lock
	@.venv-lock/bin/pip install --quiet -r requirements.txt -r requirements-dev.txt
	@{ echo "# Full resolved environment (pip freeze) that CI tested; used as -c constraints by make install."; \
	   echo "# Regenerate with \`make lock\` after changing requirements*.txt."; \
	   .venv-lock/bin/pip freeze --exclude-editable; } > constraints.txt
	@rm -rf .venv-lock && echo "constraints.txt updated"

.PHONY: clean
clean: down ## Stop the stack and delete local state (.local/); keeps .venv and .jvm
	@rm -rf .local
