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

# the browser tests drive Debian's Chromium (Playwright never downloads a browser here). Two runs: everything
# else in JOBS processes (pytest-xdist, a test file per process), then the browser tests alone (a JupyterLab page
# each, which would only compete with the first run for the cores); both always run, and either failing fails it
JOBS ?= 2
test: install
	command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium chromium-driver)
	ok=0; $(BIN)/python -m pytest -q -rs -n $(JOBS) --dist loadfile -m "not browser" || ok=1; \
	$(BIN)/python -m pytest -q -rs -m browser || ok=1; exit $$ok
