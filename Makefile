# Developer and CI entry points.  `make help` lists the targets.
#
# Two virtual environments, each built once and rebuilt only when its stamp is stale:
#   .venv          the project, editable, with the `dev` extra (pyarrow 26, Spark, Dagster)
#   .venv-interop  pypaimon 2.1.0 (pins pyarrow<20) for the interop tests and baselines;
#                  `make bench` adds the optional pypaimon-rust runtime (its own stamp)

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

PYTHON ?= python3
VENV := .venv
VENV_STAMP := $(VENV)/.installed
INTEROP_VENV := .venv-interop
INTEROP_STAMP := $(INTEROP_VENV)/.installed
RUST_STAMP := $(INTEROP_VENV)/.pypaimon-rust
PYPAIMON_SPEC ?= pypaimon==2.1.0
PYPAIMON_RUST_SPEC ?= pypaimon-rust==0.4.0
# Apache Paimon 0.9's Java core, the judge of the `java` tests: the pypaimon 0.2.0 sdist ships it
# as a jar; pyspark's jars supply the Hadoop classes its parquet reader needs.
PAIMON_JAVA_SPEC ?= pypaimon==0.2.0
PAIMON_JAVA_DIR := .cache/paimon-java
PAIMON_JAVA_STAMP := $(PAIMON_JAVA_DIR)/.built
PAIMON_JAVA_PYTHON ?= $(VENV)/bin/python
# The engine's own Spark classes (the deletion-vector row filter), compiled against pyspark's jars
# into the package, where create_session finds the jar.
SPARK_JAVA_SRC := $(wildcard lakehouse_engine/spark/java/*.java)
SPARK_JAR := lakehouse_engine/spark/java/lakehouse-spark.jar

WAREHOUSE ?= ./warehouse
# One Dagster instance for `make run` and `make dev`, so the UI shows the runs (project-local).
DAGSTER_HOME ?= $(CURDIR)/.dagster_home
export DAGSTER_HOME
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` (one per core; 0 runs in one process)
PYTEST_WORKERS ?= 2
RUN_ARGS ?=
BENCH_ARGS ?=
RELIABILITY_ARGS ?=

# Spark must bind to loopback (no resolvable hostname in CI sandboxes).
export SPARK_LOCAL_IP := 127.0.0.1
# Pin str hashing so runs do not depend on the caller's environment; PySpark also
# requires one fixed value shared by the driver and its Python workers.
export PYTHONHASHSEED := 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help paimon-java spark-jar test lint run bench soak dev docs clean distclean reliability chromium azurite

help:
	@echo "make test       lint + pytest -m 'not slow' on PYTEST_WORKERS=2 workers (PYTEST_ARGS='...' passed to pytest)"
	@echo "make lint       ruff check + mypy"
	@echo "make run        run the pipelines once (WAREHOUSE=$(WAREHOUSE), RUN_ARGS='...')"
	@echo "make bench      benchmarks (bench.run_all, BENCH_ARGS='...')"
	@echo "make soak       pytest -m slow"
	@echo "make reliability  adversarial campaigns -> docs/reliability.md (RELIABILITY_ARGS=--quick)"
	@echo "make dev        dagster dev on http://127.0.0.1:3000 (DAGSTER_HOME=$(DAGSTER_HOME): shows make run's runs)"
	@echo "make .venv / make .venv-interop   build the virtual environments"
	@echo "make paimon-java  fetch Paimon 0.9's Java core and compile the judge (tests marked java)"
	@echo "make spark-jar  compile the engine's Spark classes (Spark's read of deletion-vector tables)"
	@echo "make azurite    install Azurite (npm) into .cache/azurite for the Azure test"
	@echo "make clean      remove warehouse and caches; distclean also removes the venvs"

# ---------------------------------------------------------------- environments
$(VENV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -e '.[dev]'
	touch $@

$(VENV): $(VENV_STAMP)
	@:

$(INTEROP_STAMP):
	$(PYTHON) -m venv $(INTEROP_VENV)
	$(INTEROP_VENV)/bin/pip install '$(PYPAIMON_SPEC)'
	touch $@

# Only the benchmarks use pypaimon-rust: `make test` does not download it.
$(RUST_STAMP): $(INTEROP_STAMP)
	$(INTEROP_VENV)/bin/pip install '$(PYPAIMON_RUST_SPEC)' \
	  || echo "WARNING: could not install $(PYPAIMON_RUST_SPEC); only the benchmarks use it" \
	          "(bench/pypaimon_baseline.py --rust will report it unavailable)" >&2
	touch $@

# The browser test drives Debian's chromium (Playwright's own download is not used). Installed
# when missing and we are root with apt; otherwise the test skips and says why.
chromium:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  apt-get update -qq && apt-get install -y -qq chromium >/dev/null \
	    || echo "WARNING: could not install chromium; the browser test will skip" >&2; \
	else echo "NOTE: chromium is not installed and we are not root: the browser test will skip" >&2; fi

# Azurite (Microsoft's Blob Storage emulator, npm) for the Azure test; best effort like chromium.
azurite:
	@if command -v azurite-blob >/dev/null 2>&1 || [ -x .cache/azurite/node_modules/.bin/azurite-blob ]; then :; \
	elif command -v npm >/dev/null 2>&1; then \
	  mkdir -p .cache/azurite && (cd .cache/azurite && npm install --no-audit --no-fund --silent azurite@3) \
	    || echo "WARNING: could not install Azurite; the Azure test will skip" >&2; \
	else echo "NOTE: npm is not installed: the Azure test (Azurite) will skip" >&2; fi

$(INTEROP_VENV): $(INTEROP_STAMP)
	@:

# ---------------------------------------------------------------- Paimon Java judge
# Needs only a Python with pip and pyspark (PAIMON_JAVA_PYTHON) and a JDK 17 `javac`; the sdist
# download is the only network access and is skipped once the jar is extracted.
$(PAIMON_JAVA_STAMP): tests/java/PaimonJudge.java
	mkdir -p $(PAIMON_JAVA_DIR)/sdist $(PAIMON_JAVA_DIR)/classes
	if [ ! -f $(PAIMON_JAVA_DIR)/paimon.jar ]; then \
	  $(PAIMON_JAVA_PYTHON) -m pip download --quiet --no-deps --no-binary :all: \
	    -d $(PAIMON_JAVA_DIR)/sdist '$(PAIMON_JAVA_SPEC)'; \
	  tar -xzf $(PAIMON_JAVA_DIR)/sdist/pypaimon-*.tar.gz -O --wildcards \
	    '*/deps/jars/paimon-python-java-bridge-*.jar' > $(PAIMON_JAVA_DIR)/paimon.jar.tmp; \
	  mv $(PAIMON_JAVA_DIR)/paimon.jar.tmp $(PAIMON_JAVA_DIR)/paimon.jar; \
	  rm -rf $(PAIMON_JAVA_DIR)/sdist; \
	fi
	jars=$$($(PAIMON_JAVA_PYTHON) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))'); \
	javac -nowarn -d $(PAIMON_JAVA_DIR)/classes \
	  -cp "$(PAIMON_JAVA_DIR)/paimon.jar:$$(ls $$jars/hadoop-client-api-*.jar):$$(ls $$jars/hadoop-client-runtime-*.jar)" \
	  tests/java/PaimonJudge.java
	touch $@

paimon-java: $(PAIMON_JAVA_STAMP)

# ---------------------------------------------------------------- the engine's Spark jar
# Needs javac (JDK 17) and pyspark in $(VENV). Without javac the jar is not built and Spark reads
# deletion-vector tables by a broadcast join instead (exact, slower): a warning, not a failure.
$(SPARK_JAR): $(SPARK_JAVA_SRC) | $(VENV)
	@if ! command -v javac >/dev/null 2>&1; then \
	  echo "WARNING: no javac: $@ not built; Spark reads deletion-vector tables by a join" >&2; \
	else \
	  jars=$$($(VENV)/bin/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))'); \
	  classes=$$(mktemp -d); \
	  javac -nowarn --release 17 -d "$$classes" -cp "$$jars/*" $(SPARK_JAVA_SRC); \
	  jar cf $@.tmp -C "$$classes" .; \
	  rm -rf "$$classes"; \
	  mv $@.tmp $@; \
	fi

spark-jar: $(SPARK_JAR)

# ---------------------------------------------------------------- checks
lint: $(VENV)
	@status=0; \
	$(VENV)/bin/ruff check lakehouse_engine pipelines tests bench || status=1; \
	$(VENV)/bin/mypy || status=1; \
	$(VENV)/bin/lint-imports || status=1; \
	exit $$status

test: $(VENV) $(INTEROP_VENV) chromium azurite paimon-java spark-jar lint
	LAKEHOUSE_REQUIRE_SPARK_JAR=1 $(VENV)/bin/python -m pytest -m "not slow" -q -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

soak: $(VENV) $(INTEROP_VENV) spark-jar
	$(VENV)/bin/python -m pytest -m slow -q $(PYTEST_ARGS)

# ---------------------------------------------------------------- running
run: $(VENV) spark-jar
	$(VENV)/bin/python -m pipelines.scripts.run_main --warehouse $(WAREHOUSE) $(RUN_ARGS)

bench: $(VENV) $(INTEROP_VENV) $(RUST_STAMP) spark-jar
	$(VENV)/bin/python -m bench.run_all $(BENCH_ARGS)

reliability: $(VENV) $(INTEROP_VENV)
	$(VENV)/bin/python -m bench.reliability $(RELIABILITY_ARGS)

dev: $(VENV)
	$(VENV)/bin/python -m pipelines.scripts.instance >/dev/null
	LAKEHOUSE_WAREHOUSE=$(WAREHOUSE) exec $(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

# ---------------------------------------------------------------- cleaning
clean:
	rm -rf warehouse pipeline .dagster_home .pytest_cache .mypy_cache .ruff_cache .hypothesis build dist
	rm -rf ./*.egg-info docs/*.tmp $(SPARK_JAR)
	find . \( -path ./$(VENV) -o -path ./$(INTEROP_VENV) -o -path ./.git \) -prune \
	  -o -type d -name __pycache__ -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) $(INTEROP_VENV) $(PAIMON_JAVA_DIR)

docs: $(VENV)
	$(VENV)/bin/python -m tools.options_doc > docs/options.md
