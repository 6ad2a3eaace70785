# The two commands of the README, and the rest of the project's chores.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run test test-kafka lint kafka clean

run: $(VENV)/.installed
	$(BIN)/session-stream dev

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

# The integration tests again, against Apache Kafka assembled from Maven Central.
test-kafka: $(VENV)/.installed
	SESSION_STREAM_TEST_BROKER=kafka $(BIN)/python -m pytest -q -m integration

lint: $(VENV)/.installed
	$(BIN)/ruff check .

kafka:
	scripts/assemble-kafka.sh

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

clean:
	rm -rf $(VENV) .session-stream .pytest_cache .ruff_cache
