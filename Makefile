# The two set-up commands of the README: `make demo` (main job, offline) and `make test`.
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_OUT ?= runs/demo

.PHONY: demo test lint bench clean

demo:
	@scripts/setup.sh
	$(BIN)/simpact plan non_toppling_push --overwrite --out $(DEMO_OUT)

test:
	@scripts/setup.sh dev
	$(BIN)/python -m pytest -q

lint:
	@scripts/setup.sh dev
	$(BIN)/ruff check simpact solvers real2sim robot tests
	$(BIN)/ruff format --check simpact solvers real2sim robot tests
	$(BIN)/mypy

bench:
	@scripts/setup.sh
	$(BIN)/simpact bench perf --out runs/bench-perf

clean:
	rm -rf $(VENV) runs build *.egg-info
