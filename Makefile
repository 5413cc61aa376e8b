# The two set-up commands of the README: `make demo` (main job, offline) and `make test`.
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_OUT ?= runs/demo

.PHONY: demo test lint bench clean

demo:
	@scripts/setup.sh
	$(BIN)/simpact plan non_toppling_push --overwrite --out $(DEMO_OUT)

# The suite on TEST_WORKERS processes (pytest-xdist, a file per worker at a time), one BLAS/OpenMP thread
# each: on two cores that halves the time, where more threads per worker only contend. The tests that drive
# a franky-sim server run after, one at a time: its 1 kHz loop needs a core to itself. Its fixtures live in
# tests/robot, so only that folder is collected for them (collecting the whole suite again costs 17 s).
TEST_WORKERS ?= 2
test:
	@scripts/setup.sh dev
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not franky_sim"
	$(BIN)/python -m pytest -q -m franky_sim tests/robot

lint:
	@scripts/setup.sh dev
	$(BIN)/ruff check simpact solvers real2sim robot tests scripts
	$(BIN)/ruff format --check simpact solvers real2sim robot tests scripts
	$(BIN)/mypy

bench:
	@scripts/setup.sh
	$(BIN)/simpact bench perf --out runs/bench-perf

clean:
	rm -rf $(VENV) runs build *.egg-info
