# The two commands of the README's quick start: `make demo` and `make test`.
PYTHON ?= python3
BACKENDS ?= jax tensorflow torch

.PHONY: install test test-large demo lint

install:
	$(PYTHON) -m pip install -q -e ".[dev]"

# Every test on every backend; fails if any backend fails.
test: install
	@status=0; for backend in $(BACKENDS); do \
		echo "=== KERAS_BACKEND=$$backend ==="; \
		KERAS_BACKEND=$$backend $(PYTHON) -m pytest -q -p no:cacheprovider \
			|| status=1; \
	done; exit $$status

# The slow tests (marked `large`), excluded from `make test`.
test-large: install
	@status=0; for backend in $(BACKENDS); do \
		KERAS_BACKEND=$$backend $(PYTHON) -m pytest -q -m large || status=1; \
	done; exit $$status

lint: install
	ruff check . && ruff format --check .

# The main job: get Ding de-en, train a small RNNsearch, evaluate, translate,
# plot alignments and export a SavedModel (runs/ding_de_en, saved_models/).
# On JAX unless KERAS_BACKEND says otherwise: the fastest backend on a CPU
# (benchmarks/README.md).
demo: install
	KERAS_BACKEND=$${KERAS_BACKEND:-jax} keras-bahdanau demo
