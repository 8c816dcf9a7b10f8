# The two commands of the README's quick start: `make demo` and `make test`.
PYTHON ?= python3
BACKENDS ?= jax tensorflow torch
# The demo runs on JAX, the fastest backend on a CPU (benchmarks/README.md),
# unless KERAS_BACKEND says otherwise, and installs that backend only
# (TensorFlow comes with the package): no torch download for a JAX demo.
DEMO_BACKEND = $(or $(KERAS_BACKEND),jax)
DEMO_EXTRA = $(if $(filter jax torch,$(DEMO_BACKEND)),[$(DEMO_BACKEND)])
# The exact versions CI and the main job run with (pyproject.toml holds the
# ranges a plain `pip install` resolves).
CONSTRAINTS = constraints.txt
PIP_INSTALL = $(PYTHON) -m pip install -q -c $(CONSTRAINTS)

.PHONY: install test test-large demo lint

# The tests run on every backend: all of them, and the dev tools.
install:
	$(PIP_INSTALL) -e ".[all,dev]"

# Test processes per backend (pytest-xdist): most of the suite runs on one
# core (XLA compilation, eager torch), so two keep a 2-core machine busy.
# TEST_WORKERS=0 runs the tests in pytest's own process.
TEST_WORKERS ?= 2

# Every test on every backend; fails if any backend fails.
test: install
	@status=0; for backend in $(BACKENDS); do \
		echo "=== KERAS_BACKEND=$$backend ==="; \
		KERAS_BACKEND=$$backend $(PYTHON) -m pytest -q -p no:cacheprovider \
			-n $(TEST_WORKERS) || status=1; \
	done; exit $$status

# The slow tests (marked `large`), excluded from `make test`.
test-large: install
	@status=0; for backend in $(BACKENDS); do \
		KERAS_BACKEND=$$backend $(PYTHON) -m pytest -q -m large || status=1; \
	done; exit $$status

# ruff's lint rules and its formatter's check (pyproject.toml), in seconds.
lint: install
	$(PYTHON) -m ruff check . && $(PYTHON) -m ruff format --check .

# The main job: get Ding de-en, train a small RNNsearch, evaluate, translate,
# plot alignments and export a SavedModel (runs/ding_de_en, saved_models/).
demo:
	$(PIP_INSTALL) -e ".$(DEMO_EXTRA)"
	KERAS_BACKEND=$(DEMO_BACKEND) keras-bahdanau demo
