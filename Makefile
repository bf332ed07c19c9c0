# The README's two commands. `make demo` and `make test` each build .venv from
# scratch when it is missing, so both work on a fresh clone.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/tlx-workbench: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

.PHONY: install demo test
install: $(BIN)/tlx-workbench

demo: install
	$(BIN)/tlx-workbench demo

# the browser tests drive Debian's Chromium (Playwright never downloads a browser here)
test: install
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver)
	$(BIN)/python -m pytest -q -rs
