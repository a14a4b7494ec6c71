# The two commands of the README:  `make all` (the study)  and  `make test` (the tests).
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= config/local.yaml
SNAKE_ARGS ?=

.PHONY: all test test-e2e deps build clean-testbed lint help rehearsal rehearsal-ci

help:
	@echo "make all    install what is missing, then snakemake --cores 1 all (config: $(CONFIG))"
	@echo "make test   install what is missing, then run the test suite (all but the end-to-end runs)"
	@echo "make test-e2e  the end-to-end runs: the CI-sized study through Snakemake, the rehearsal lab (CI runs both)"
	@echo "make build  build the C parts (XDP programs, XenoFlow on the DOCA Flow emulation)"
	@echo "make lint   ruff, snakefmt --check and snakemake --lint (part of make test)"
	@echo "make rehearsal     the fips plan over SSH on the rehearsal lab (config/rehearsal.yaml); rehearsal-ci: its CI size"

deps:
	@scripts/install-deps.sh

build: deps
	@scripts/build.sh

all: build
	$(BIN)/snakemake --cores 1 all --configfile $(CONFIG) $(SNAKE_ARGS)

# pytest-xdist: TEST_WORKERS processes, a test file per worker at a time (its module fixtures built
# once); each worker's testbed has its own namespace prefix (tests/conftest.py). TEST_WORKERS=0: one process
TEST_WORKERS ?= 2
test: build lint
	$(BIN)/python -m pytest -m "not e2e" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# the whole runs (pytest marker e2e): the CI-sized study through Snakemake (figures, resume after
# Ctrl-C and kill -9) and the rehearsal lab's day-one defects and faults over SSH; then every
# Hypothesis test again under the "deep" profile (the example counts as written); CI runs it
test-e2e: build
	$(BIN)/python -m pytest -m e2e $(PYTEST_ARGS)
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest -m hypothesis $(PYTEST_ARGS)

# ruff on the Python (pyproject.toml [tool.ruff]), snakefmt's format ([tool.snakefmt]) and Snakemake's own
# linter on the workflow
lint: deps
	$(BIN)/ruff check xenobench tests scripts trex_profiles standins
	$(BIN)/snakefmt --check Snakefile rules/
	$(BIN)/snakemake --lint --cores 1 -n > /dev/null

# the thesis testbed rehearsed on this machine (docs/thesis-testbed.md): lab up,
# the fips plan over SSH, testbed down --purge, nothing left on the nodes, lab down (also on failure)
rehearsal: build
	scripts/rehearsal.sh config/rehearsal.yaml

rehearsal-ci: build
	scripts/rehearsal.sh config/rehearsal-ci.yaml

clean-testbed: deps
	$(BIN)/xenobench --config $(CONFIG) testbed down
