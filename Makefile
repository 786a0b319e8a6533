# handgrad — build, test, train.
#
#   make train   install what is missing, build, fetch tiny Shakespeare, train the course GPT, sample
#   make test    install what is missing, build, run the Catch2 suite (gradient checks first)
#   make asan    the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer (without MPI)
#   make plot    the pictures of a run (after make train; OUT_DIR=DIR for another run), PNGs in its out_dir
#   make crosscheck  every tensor against a PyTorch reference; conversions to and from nanoGPT
#   make train-mpi NP=2   the same training, data-parallel over NP processes with Open MPI
#   make test-mpi         the multi-process tests (2 ranks under mpirun)
#   make data-gpt2   GPT-2's tokenizer files (encoder.json, vocab.bpe) into data/gpt2, md5-checked
#   make fuzz FUZZ_SECONDS=N   each libFuzzer harness (tests/fuzz/) N seconds, under ASan + UBSan
#   make finetune    OpenAI's GPT-2 (converted from Hugging Face's files) fine-tuned on tiny Shakespeare
#   make llmc-check LLMC=PATH   handgrad's GPT-2 checked by llm.c's test_gpt2.c and train_gpt2.c (docs/llmc.md)
#
# Layout: lib/**/*.cpp -> build/libhandgrad.a;  apps/X.cpp -> build/X;  tests/*.cpp -> build/tests

CXX      ?= g++
BUILD    ?= build
SAN      ?=
# -O3, and never the "fast math" options: finite differences and GELU's backward need IEEE floats.
# No -march=native: Highway compiles every x86 target itself and picks one at run time,
# so one binary uses AVX-512 here and still runs on an older x86-64.
OPT      ?= -O3
# -ffp-contract=off: the compiler never fuses a*b+c into an FMA by itself, so scalar code (the
# twins, the kernels' scalar tails) rounds each operation as written. That is not bit-identity
# across SIMD targets: Highway's MulAdd fuses on AVX2 and not on SSE4, and lane sums follow the
# vector width. The same SIMD target and thread setting give the same bits (lib/kernels/simd.h).
DEBUG    ?= -g
CXXFLAGS ?= $(OPT) $(DEBUG) -std=c++17 -ffp-contract=off -Wall -Wextra -Wshadow -Wno-unused-parameter
# -MD, not -MMD: the SIMD kernels reach their own headers (bf16-inl.h, map-inl.h, ...) through
# Highway's <hwy/foreach_target.h>, and -MMD leaves out every header included from a system
# header, so an edit to one of them would rebuild nothing.
CPPFLAGS += -I. -MD -MP

# Where the libraries are is asked, never assumed (docs/platforms.md). TRIPLET is the compiler's
# multiarch name (x86_64-linux-gnu, aarch64-linux-gnu; empty where there is none, as on macOS);
# the rest comes from pkg-config. CROSS=aarch64-linux-gnu builds for that triplet with its g++
# (ccache kept if CXX has it; CXX= on the command line wins) against Debian's multiarch
# packages of it (make deps-arm64), without MPI.
CROSS ?=
ifneq ($(CROSS),)
  ifneq ($(origin CXX),command line)
    CXX := $(if $(filter ccache,$(CXX)),ccache )$(CROSS)-g++
  endif
  MPI        ?= 0
  ONEDNN     ?= 0
  PKG_CONFIG ?= PKG_CONFIG_LIBDIR=/usr/lib/$(CROSS)/pkgconfig:/usr/share/pkgconfig pkg-config
endif
PKG_CONFIG ?= pkg-config
TRIPLET    := $(shell $(CXX) -print-multiarch 2>/dev/null)
# GCC on aarch64 notes that passing some structs changed ABI in GCC 10 (nothing here mixes
# compilers that old): silenced, so that warnings stay the signal.
CXXFLAGS   += $(if $(filter aarch64%,$(TRIPLET)),-Wno-psabi)

# OpenMP (switch off with OPENMP=0): our own loops, and OpenBLAS too, because we link
# OpenBLAS's OpenMP build so both share one thread pool and never oversubscribe. Debian ships
# it in /usr/lib/TRIPLET/openblas-openmp, next to the pthread build, and pkg-config's openblas
# follows whichever the alternatives system picked; so that directory first, pkg-config's
# otherwise. BLAS_DIR= (the directory of libopenblas), BLAS_INC= (-I flags) and BLAS_LIB= (the
# library: Fedora's OpenMP build is -lopenblaso) override them.
OPENMP ?= 1
BLAS_BUILD := openblas-$(if $(filter 1,$(OPENMP)),openmp,pthread)
BLAS_LIB   ?= -lopenblas
# OMP_FLAGS / OMP_LIBS: how this compiler spells OpenMP (Apple's clang needs libomp named).
OMP_FLAGS ?= -fopenmp
OMP_LIBS  ?= -fopenmp
ifeq ($(OPENMP),1)
  CXXFLAGS += $(OMP_FLAGS)
  LDFLAGS  += $(OMP_LIBS)
endif
BLAS_DIR ?= $(or $(wildcard /usr/lib/$(TRIPLET)/$(BLAS_BUILD)),$(shell $(PKG_CONFIG) --variable=libdir openblas 2>/dev/null))
BLAS_INC ?= $(if $(wildcard /usr/include/$(TRIPLET)/$(BLAS_BUILD)),-I/usr/include/$(TRIPLET)/$(BLAS_BUILD),$(filter -I%,$(shell $(PKG_CONFIG) --cflags openblas 2>/dev/null)))
# Highway, fmt and PCRE2 (8-bit code units, with Unicode properties: GPT-2's pre-tokenizer
# pattern, lib/text/bpe.cpp): include paths and libraries from pkg-config, plain -l names without it.
DEP_PC   := libhwy libhwy-contrib fmt libpcre2-8
DEP_INC  := $(filter -I%,$(shell $(PKG_CONFIG) --cflags $(DEP_PC) 2>/dev/null))
DEP_LIBS := $(or $(shell $(PKG_CONFIG) --libs $(DEP_PC) 2>/dev/null),-lhwy_contrib -lhwy -lfmt -lpcre2-8)
CPPFLAGS += $(BLAS_INC) $(DEP_INC)
comma    := ,
LDLIBS   += $(if $(BLAS_DIR),-L$(BLAS_DIR) -Wl$(comma)-rpath$(comma)$(BLAS_DIR)) $(BLAS_LIB) $(DEP_LIBS) -lm

# MPI (switch off with MPI=0): data-parallel training across processes, when Open MPI's
# compiler wrapper is installed (`make deps-mpi` installs it; the normal build never needs it).
# Only lib/process/dist.cpp sees <mpi.h> (C API only: OMPI_SKIP_MPICXX); without MPI it compiles its one-process versions. Every
# binary links libmpi then, but starts MPI only when launched by mpirun (lib/process/dist.h).
MPI ?= $(if $(shell command -v mpicxx 2>/dev/null),1,0)
ifeq ($(MPI),1)
  MPI_CPPFLAGS := -DHANDGRAD_MPI -DOMPI_SKIP_MPICXX $(shell mpicxx --showme:compile)
  LDLIBS       += $(filter-out -lmpi_cxx,$(shell mpicxx --showme:link))
endif

ifneq ($(SAN),)
  CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS  += -fsanitize=address,undefined
endif

LIB_SRC  := $(sort $(wildcard lib/*/*.cpp))
APP_SRC  := $(sort $(wildcard apps/*.cpp))
TEST_SRC := $(sort $(wildcard tests/*.cpp))
LIB_OBJ  := $(LIB_SRC:%.cpp=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.cpp=$(BUILD)/obj/%.o)
APPS     := $(APP_SRC:apps/%.cpp=$(BUILD)/%)

# Everything the build and the tools need, as Debian packages (installed by `make deps`).
DEB_PKGS := g++ make pkg-config libopenblas-dev libopenblas-openmp-dev libhwy-dev catch2 \
            libfmt-dev nlohmann-json3-dev libcli11-dev libpcre2-dev python3-regex curl ca-certificates
MPI_PKGS := libopenmpi-dev openmpi-bin
FUZZ_PKGS := clang libclang-rt-dev libomp-dev

SHARED_DATA ?= ../shared/data/tinyshakespeare.txt
DATA        := data/tinyshakespeare/input.txt
SHARED_GPT2 ?= ../shared/data/gpt2
GPT2_DIR    := data/gpt2
GPT2_FILES  := $(GPT2_DIR)/encoder.json $(GPT2_DIR)/vocab.bpe
# oneDNN (switch off with ONEDNN=0): a second backend for the float products
# (lib/kernels/matmul.h) and the bf16 products' fast path (lib/kernels/matmul_bf16.h), on by
# default when its headers are installed (`make deps` installs libdnnl-dev). Without it
# everything builds and runs on OpenBLAS alone, bf16 products widened to float. Switching it
# rebuilds the library. Cross builds leave it off (make deps-arm64 does not install it).
ONEDNN ?= $(if $(wildcard /usr/include/oneapi/dnnl/dnnl.h),1,0)
DEB_PKGS += libdnnl-dev
ifeq ($(ONEDNN),1)
  CPPFLAGS += -DHANDGRAD_ONEDNN
  LDLIBS   += -ldnnl
endif
$(LIB_OBJ): $(BUILD)/onednn-$(ONEDNN).stamp $(BUILD)/deps-md.stamp
# A build whose dependency files were written by -MMD (before -MD) is rebuilt once.
$(BUILD)/deps-md.stamp:
	@mkdir -p $(BUILD) && touch $@
$(BUILD)/onednn-$(ONEDNN).stamp:
	@mkdir -p $(BUILD) && rm -f $(BUILD)/onednn-*.stamp && touch $@

OUT_DIR     ?= out-shakespeare-char
THREADS     ?= $(shell nproc 2>/dev/null || sysctl -n hw.ncpu)
JOBS        ?= $(shell nproc 2>/dev/null || sysctl -n hw.ncpu)

.PHONY: all deps deps-mpi deps-fuzz fuzz build test test-mpi asan train train-mpi sample bench bench-threads test-threads16 plot data data-gpt2 clean crosscheck speedrun speedrun-search \
        crosscheck-deps finetune
.DEFAULT_GOAL := all
all: build

# Install only what is missing; as root directly, otherwise through sudo.
deps deps-mpi deps-fuzz:
	@command -v dpkg-query >/dev/null || { echo "$@: not a Debian system: install the packages of docs/platforms.md yourself"; exit 0; }; \
	missing=$$(for p in $(if $(filter deps-mpi,$@),$(MPI_PKGS),$(if $(filter deps-fuzz,$@),$(FUZZ_PKGS),$(DEB_PKGS))); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

build: deps
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS)) $(APPS) $(BUILD)/tests

$(BUILD)/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -c $< -o $@

# The apps and the tests are thin over the library (flags, printing, checks; every hot loop is in
# lib/): -O1 with line tables only (-g1) builds them in half the time of $(OPT) $(DEBUG). Scalar
# results do not change with -O (-ffp-contract=off, no fast-math), so neither do the tests'.
# Under the sanitizers (make asan) the apps are compiled at -O0, in two thirds of the time, and
# the tests' own code with AddressSanitizer alone (the library and the apps keep UBSan too), in
# three fifths: that build is CI's longest step.
THIN_FLAGS ?= -O1 -g1
$(BUILD)/obj/tests/%.o: CXXFLAGS += $(THIN_FLAGS) $(if $(SAN),-fno-sanitize=undefined)
$(BUILD)/obj/apps/%.o: CXXFLAGS += $(THIN_FLAGS) $(if $(SAN),-O0)

# dist.o alone is compiled with MPI, and again whenever MPI is switched on or off.
$(BUILD)/obj/lib/process/dist.o: CPPFLAGS += $(MPI_CPPFLAGS)
$(BUILD)/obj/lib/process/dist.o: $(BUILD)/mpi-$(MPI).stamp
$(BUILD)/mpi-$(MPI).stamp:
	@mkdir -p $(BUILD) && rm -f $(BUILD)/mpi-*.stamp && touch $@

$(BUILD)/libhandgrad.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# An app's object is kept, not removed as an intermediate file, so a rebuild relinks only what changed.
.SECONDARY: $(APP_SRC:%.cpp=$(BUILD)/obj/%.o)
$(BUILD)/%: $(BUILD)/obj/apps/%.o $(BUILD)/libhandgrad.a
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# Catch2 3 is a compiled library (its pkg-config file names it); Catch2 2 is one header and
# links nothing (tests/catch.h picks the headers).
CATCH_LIBS := $(shell $(PKG_CONFIG) --libs catch2 2>/dev/null)
$(BUILD)/tests: $(TEST_OBJ) $(BUILD)/libhandgrad.a
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(CATCH_LIBS)

# The suite: gradient checks, kernels against their scalar twins, model, training, apps.
# HANDGRAD_DATA points the tests at tiny Shakespeare, HANDGRAD_GPT2 at the directory with GPT-2's
# encoder.json and vocab.bpe (fetched by `make data` and `make data-gpt2` if missing).
# HANDGRAD_BIN tells the app tests which build's binaries to run.
TEST_ENV = HANDGRAD_DATA=$(abspath $(DATA)) HANDGRAD_GPT2=$(abspath $(GPT2_DIR))
test: build data data-gpt2
	$(TEST_ENV) HANDGRAD_BIN=$(BUILD) OMP_NUM_THREADS=$(THREADS) \
	  ./$(BUILD)/tests --durations yes $(TEST_ARGS)

# The threading tests with 16 threads on whatever cores there are (oversubscribed on a small
# machine): the products' splits against the unsplit product, every layer against its twin,
# determinism for a fixed thread setting, and a step allocating nothing.
THREADS16_TESTS ?= "[matmul]~[apps],[split],[gemm],[linear],[determinism],[alloc],[layers]~[apps],[flash],[attention],[muon]~[apps],[batch_threads]~[apps]~[mpi]"
test-threads16: build data data-gpt2
	$(TEST_ENV) HANDGRAD_BIN=$(BUILD) OMP_NUM_THREADS=16 ./$(BUILD)/tests $(THREADS16_TESTS) $(TEST_ARGS)

# The same suite, apps included, built with AddressSanitizer + UndefinedBehaviorSanitizer.
asan: deps data data-gpt2
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS)) BUILD=build-asan SAN=1 OPT=-O1 DEBUG=-g1 MPI=0 \
	  $(APP_SRC:apps/%.cpp=build-asan/%) build-asan/tests
	$(TEST_ENV) HANDGRAD_BIN=build-asan ASAN_OPTIONS=detect_leaks=0 \
	  UBSAN_OPTIONS=print_stacktrace=1 OMP_NUM_THREADS=$(THREADS) ./build-asan/tests $(TEST_ARGS)

# The fuzzers: each tests/fuzz/fuzz_X.cpp is a libFuzzer harness, built with clang++ and
# -fsanitize=fuzzer,address,undefined (the library too, into build-fuzz), run FUZZ_SECONDS from
# its seed corpus tests/fuzz/X/ (new inputs it finds go to build-fuzz/corpus/X, not into the
# tree). Any crash, leak or undefined behaviour stops it with a non-zero exit, leaving the input
# as build-fuzz/crash-*: such an input belongs in tests/fuzz/X/ and in the Catch2 suite
# (tests/test_fuzz_regressions.cpp). The last lines of each run give its executions per second.
FUZZ_SECONDS ?= 60
FUZZ_CXX     ?= clang++
# One SIMD target (Highway's static one): the fuzzers test parsing, not kernels, and each kernel
# file would otherwise be compiled for every target, under sanitizers.
FUZZ_FLAGS   := -O1 -g1 -std=c++17 -fopenmp -fno-omit-frame-pointer -fsanitize=address,undefined \
                -fno-sanitize-recover=undefined -DHWY_COMPILE_ONLY_STATIC=1
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.cpp))
FUZZ_BINS    := $(FUZZ_SRC:tests/fuzz/%.cpp=build-fuzz/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.cpp=build-fuzz/obj/%.o)
FUZZ_BLAS    := /usr/lib/$(TRIPLET)/openblas-pthread
build-fuzz/obj/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(CPPFLAGS) -I$(FUZZ_BLAS:/usr/lib/%=/usr/include/%) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
build-fuzz/libhandgrad.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
build-fuzz/fuzz_%: build-fuzz/obj/tests/fuzz/fuzz_%.o build-fuzz/libhandgrad.a
	$(FUZZ_CXX) $(FUZZ_FLAGS) -fsanitize=fuzzer $^ -o $@ -L$(FUZZ_BLAS) -Wl,-rpath,$(FUZZ_BLAS) -lopenblas \
	  -lhwy -lhwy_contrib -lfmt -lm -lpthread $(or $(shell pkg-config --libs libpcre2-8 2>/dev/null),-lpcre2-8) \
	  $(if $(filter 1,$(ONEDNN)),-ldnnl)
fuzz: deps deps-fuzz data-gpt2
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS)) $(FUZZ_BINS)
	@for h in $(FUZZ_BINS:build-fuzz/%=%); do \
	  mkdir -p build-fuzz/corpus/$$h; echo "== $$h: $(FUZZ_SECONDS) s"; \
	  HANDGRAD_GPT2=$(abspath $(GPT2_DIR)) UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ./build-fuzz/$$h -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/ build-fuzz/corpus/$$h tests/fuzz/$${h#fuzz_} > build-fuzz/$$h.log 2>&1; \
	  rc=$$?; grep -E "^stat::(number_of_executed_units|average_exec_per_sec)" build-fuzz/$$h.log; \
	  if [ $$rc -ne 0 ]; then tail -60 build-fuzz/$$h.log; echo "fuzz: $$h FAILED"; exit 1; fi; \
	done
-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_SRC:%.cpp=build-fuzz/obj/%.d)

# The main job: nanoGPT's CPU recipe for the course model on tiny Shakespeare, then the
# whole-val-split loss and a sample. No threading flags: train uses all cores and picks how
# they share a step itself (--batch_threads=auto).
TRAIN_ARGS ?= --preset=course --batch_size=12 --block_size=64 --max_iters=2000 --lr_decay_iters=2000 \
              --learning_rate=1e-3 --min_lr=1e-4 --warmup_iters=100 --beta2=0.99 --dropout=0 \
              --eval_interval=250 --eval_iters=20 --log_interval=50
train: build data
	./$(BUILD)/train $(TRAIN_ARGS) --data=$(DATA) --out_dir=$(OUT_DIR) $(EXTRA)
	./$(BUILD)/eval --ckpt=$(OUT_DIR)/ckpt.safetensors --data=$(DATA) --split=val
	./$(BUILD)/sample --out_dir=$(OUT_DIR) --max_new_tokens=500

# The ten-minute speedrun: the speedrun preset (model and recipe, found by tools/speedrun_search.py)
# trains for SPEEDRUN_BUDGET seconds of wall clock (evaluation excluded), then prints the loss
# over the whole val split, the iterations done, and a sample. Best on an otherwise idle machine.
# Threads as train sets them by default: all cores, and --batch_threads=auto, which chooses at
# start-up how many model replicas share the batch (docs/performance.md). The header line says
# which it chose.
SPEEDRUN_BUDGET  ?= 600
SPEEDRUN_DIR     ?= out-speedrun
speedrun: build data
	./$(BUILD)/train --preset=speedrun --time_budget=$(SPEEDRUN_BUDGET) \
	  --data=$(DATA) --out_dir=$(SPEEDRUN_DIR) $(EXTRA)
	./$(BUILD)/sample --out_dir=$(SPEEDRUN_DIR) --max_new_tokens=500

# The search behind the preset: each candidate's step timed, then trained for the iterations
# that fit in SEARCH_BUDGET seconds (single-threaded runs, SEARCH_JOBS at a time), and scored on
# the whole val split; a markdown table as each ends. A candidate at 600 s costs about 10 minutes of this
# 2-core machine (two train side by side, each on one core); SEARCH_ARGS='--only a,b,...' picks some.
SEARCH_BUDGET ?= 600
SEARCH_JOBS   ?= $(shell nproc)
speedrun-search: build data
	HANDGRAD_BIN=$(BUILD) HANDGRAD_DATA=$(DATA) $(PYTHON) tools/speedrun_search.py --budget $(SEARCH_BUDGET) \
	  --jobs $(SEARCH_JOBS) --out_root out-speedrun-search --out out-speedrun-search/table.md $(SEARCH_ARGS)

# Data-parallel: the same recipe on NP processes (Open MPI, installed if missing), the course's
# batch of 12 split over the ranks (12 / NP rows each), so the effective batch stays 12 and the
# run is the single-process one computed in NP pieces. Each rank gets cores / NP threads and is
# pinned to that many cores of its own (more ranks than cores: oversubscribed, unpinned).
# More hosts: docs/mpi.md.
NP          ?= 2
OUT_DIR_MPI ?= out-shakespeare-char-mpi
MPI_PE      := $(shell echo $$(( $(shell nproc) / $(NP) )))
MPI_BIND    := $(if $(filter 0,$(MPI_PE)),--oversubscribe --bind-to none,--map-by slot:PE=$(MPI_PE) --bind-to core)
MPIRUN      ?= mpirun $(MPI_BIND) $(if $(filter 0,$(shell id -u)),--allow-run-as-root)
train-mpi: deps-mpi data
	@$(MAKE) --no-print-directory build MPI=1
	$(MPIRUN) -np $(NP) ./$(BUILD)/train $(TRAIN_ARGS) --batch_size=$$((12 / $(NP))) --data=$(DATA) \
	  --out_dir=$(OUT_DIR_MPI) $(EXTRA)
	./$(BUILD)/eval --ckpt=$(OUT_DIR_MPI)/ckpt.safetensors --data=$(DATA) --split=val
	./$(BUILD)/sample --out_dir=$(OUT_DIR_MPI) --max_new_tokens=500

# The multi-process tests (tagged [mpi], hidden from `make test`): each launches
# `mpirun --oversubscribe -np 2 build/train` and checks what the ranks wrote.
test-mpi: deps-mpi data
	@$(MAKE) --no-print-directory build MPI=1
	HANDGRAD_DATA=$(abspath $(DATA)) HANDGRAD_BIN=$(BUILD) OMP_NUM_THREADS=1 \
	  ./$(BUILD)/tests "[mpi]" $(TEST_ARGS)

# handgrad's build/train with each preset against nanoGPT's training loop in PyTorch
# (tools/bench_torch.py, Debian's python3-torch), BENCH_RUNS alternating pairs per recipe, the
# median of their ratios in one table (tools/bench.py). Three pairs: about 15 minutes on 2 cores.
# The system Python, which has Debian's python3-torch; a pyenv python3 on PATH would not.
PYTHON     ?= /usr/bin/python3
BENCH_RUNS ?= 3
BENCH_ARGS ?=
bench: build data crosscheck-deps
	HANDGRAD_BIN=$(BUILD) $(PYTHON) tools/bench.py --runs $(BENCH_RUNS) --data $(DATA) $(BENCH_ARGS)

# The baby GPT's step at 1, 2, 4, ... threads up to the cores present, f32 and bf16, with the
# parallel efficiency of each (tools/bench_threads.py): how the machine at hand scales.
bench-threads: build data
	HANDGRAD_BIN=$(BUILD) $(PYTHON) tools/bench_threads.py --data $(DATA) $(BENCH_ARGS)

# The pictures of a run, PNGs in OUT_DIR: loss curves, parameters per component, attention of
# every head, logits and causality, residual-stream norms (tools/plot.py, Debian's matplotlib).
PLOT_ARGS ?=
plot: build
	@dpkg-query -W -f='$${Status}\n' python3-matplotlib 2>/dev/null | grep -q '^install ok installed' || \
	  ( SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); $$SUDO apt-get install -y -qq python3-matplotlib >/dev/null )
	HANDGRAD_BIN=$(BUILD) $(PYTHON) tools/plot.py $(OUT_DIR) $(PLOT_ARGS)

sample: build
	./$(BUILD)/sample --out_dir=$(OUT_DIR) $(EXTRA)

# Fine-tuning OpenAI's GPT-2 on tiny Shakespeare (docs/gpt2.md): the finetune-shakespeare preset
# (GPT-2's BPE, context 256, batch 4 x 2 accumulation steps, constant lr 3e-5, 20 iterations) from
# the weights in GPT2_CKPT, which tools/convert.py from-hf makes from Hugging Face's files in
# GPT2_HF (made here when only those are there). Then the whole val split and a sample. All threads
# share each layer (--batch_threads=1): timing replicas would cost several 124M-parameter steps,
# and each would need a gradient arena of its own.
GPT2_HF       ?= data/gpt2-hf/gpt2
GPT2_CKPT     ?= data/gpt2-hf/gpt2.safetensors
FINETUNE_DIR  ?= out-finetune-shakespeare
SAMPLE_TOKENS ?= 200
finetune: build data data-gpt2
	@if [ ! -f $(GPT2_CKPT) ] && [ -f $(GPT2_HF)/model.safetensors ]; then \
	  $(PYTHON) tools/convert.py from-hf $(GPT2_HF) -o $(GPT2_CKPT) || exit 1; fi
	@[ -f $(GPT2_CKPT) ] || { echo "error: no GPT-2 weights at $(GPT2_CKPT): download them with" \
	  "'curl -L --create-dirs -o $(GPT2_HF)/#1 https://huggingface.co/openai-community/gpt2/resolve/main/{model.safetensors,config.json}'" \
	  "and run make finetune again (docs/gpt2.md)"; exit 1; }
	./$(BUILD)/train --preset=finetune-shakespeare --init_from=$(GPT2_CKPT) --gpt2_dir=$(GPT2_DIR) --data=$(DATA) \
	  --out_dir=$(FINETUNE_DIR) --always_save_checkpoint=false --batch_threads=1 $(EXTRA)
	./$(BUILD)/eval --ckpt=$(FINETUNE_DIR)/ckpt.safetensors --gpt2_dir=$(GPT2_DIR) --data=$(DATA) --split=val
	./$(BUILD)/sample --out_dir=$(FINETUNE_DIR) --gpt2_dir=$(GPT2_DIR) --start="ROMEO:" --max_new_tokens=$(SAMPLE_TOKENS)

data: $(DATA)
$(DATA):
	@bash data/tinyshakespeare/prepare.sh $(SHARED_DATA)

# For --tokenizer=gpt2 (build/tokenize): copied from SHARED_GPT2 if there, else downloaded from OpenAI.
data-gpt2: $(GPT2_FILES)
$(GPT2_FILES) &:
	@bash data/gpt2/prepare.sh $(SHARED_GPT2)

# ---------------------------------------------------------------------------------------------
# PyTorch parity (tools/crosscheck.py) and weights that travel (tools/convert.py).
CC_DIR   := $(BUILD)/crosscheck-data
# The configs build/crosscheck dumps and the reference re-computes (name: model flags).
CC_course     := --preset=course
CC_gpt2_tied  := --bias_layout=gpt2 --tie_weights=true --n_layer=2 --n_head=4 --n_embd=64 --block_size=32 \
                 --vocab_size=96 --seq_len=24 --batch_size=3
CC_sinusoidal := --preset=lesson14 --batch_size=4
CC_tanh_none  := --gelu=tanh --bias_layout=none --n_layer=2 --n_head=3 --n_embd=48 --block_size=16 --batch_size=4
CC_dropout    := --preset=course --n_layer=2 --tie_weights=true --dropout=0.1 --seq_len=48
# Today's block: every choice at once (pytorch init, so the logits are large enough for a cap of 2
# to bend them), ReLU² with rope alone, and RMSNorm + QK-norm + cap on the dropout model.
CC_modern     := --norm=rmsnorm --pos=rope --mlp=swiglu --qk_norm --logit_softcap=2 --init=pytorch --n_layer=2 \
                 --n_head=4 --n_embd=64 --block_size=32 --vocab_size=96 --seq_len=24 --batch_size=3
CC_relu2_rope := --mlp=relu2 --pos=rope --bias_layout=none --tie_weights=true --n_layer=2 --n_head=3 --n_embd=48 \
                 --block_size=16 --batch_size=4
CC_rms_qk_cap := --preset=course --n_layer=2 --norm=rmsnorm --qk_norm --logit_softcap=1 --tie_weights=true \
                 --dropout=0.1 --seq_len=48
CC_muon       := --preset=course --optimizer=muon
CC_NAMES      := course gpt2_tied sinusoidal tanh_none dropout modern relu2_rope rms_qk_cap muon
CC_CORRUPT    := transformer.h.1.mlp.c_fc.weight
# A briefly trained course model for the whole-val-split eval check (~100 iterations).
CC_TRAIN_ARGS := --preset=course --batch_size=12 --max_iters=100 --lr_decay_iters=100 --learning_rate=1e-3 \
                 --min_lr=1e-4 --warmup_iters=10 --beta2=0.99 --eval_interval=100 --eval_iters=2 --log_interval=50

# The Hugging Face fixtures (tools/hf_gpt2.py): names as the hub's gpt2 files have them (no prefix), and as
# GPT2LMHeadModel saves them ("transformer.", with or without the tied lm_head.weight).
CC_HF_SIZES       := gpt2 gpt2-medium gpt2-large gpt2-xl
CC_HF_gpt2-medium := --prefix
CC_HF_gpt2-large  := --prefix --lm_head --n_layer=3
CC_HF_gpt2-xl     := --head_size=2
# The finetune recipe cut to the fixture's size: context 32, 3 iterations.
CC_FINETUNE_ARGS  := --block_size=32 --batch_size=2 --gradient_accumulation_steps=2 --max_iters=3 --eval_interval=3 \
                     --eval_iters=1 --threads=$(THREADS)

crosscheck-deps:
	@$(PYTHON) -c 'import torch, numpy' 2>/dev/null || { \
	  echo "installing: python3-torch python3-numpy"; SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq python3-torch python3-numpy >/dev/null; }

crosscheck: build data data-gpt2 crosscheck-deps
	@mkdir -p $(CC_DIR)
	@echo "== 1. logits, loss, every gradient, 3 AdamW steps: handgrad against PyTorch autograd"
	$(foreach n,$(CC_NAMES),./$(BUILD)/crosscheck $(CC_$(n)) --ckpt=$(CC_DIR)/$(n).ckpt.safetensors \
	  --out=$(CC_DIR)/$(n).dump.safetensors &&) true
	$(PYTHON) tools/crosscheck.py params --dir $(CC_DIR) $(CC_NAMES)
	@echo "== 2. the check can fail: a gradient scaled by 1.01 must be caught"
	./$(BUILD)/crosscheck $(CC_course) --corrupt_grad=$(CC_CORRUPT) --ckpt=$(CC_DIR)/corrupt.ckpt.safetensors \
	  --out=$(CC_DIR)/corrupt.dump.safetensors
	@if $(PYTHON) tools/crosscheck.py params --dir $(CC_DIR) corrupt > $(CC_DIR)/corrupt.log 2>&1; then \
	  cat $(CC_DIR)/corrupt.log; echo "crosscheck: the corrupted gradient was NOT detected"; exit 1; fi
	@grep -q "float32 grad $(CC_CORRUPT):" $(CC_DIR)/corrupt.log && grep -q "float64 grad $(CC_CORRUPT):" $(CC_DIR)/corrupt.log \
	  || { cat $(CC_DIR)/corrupt.log; echo "crosscheck: failed, but not on $(CC_CORRUPT)"; exit 1; }
	@grep -E "grad $(CC_CORRUPT):" $(CC_DIR)/corrupt.log; echo "ok: the corrupted gradient fails the check"
	@echo "== 3. build/eval against PyTorch over the whole val split, on a briefly trained course model"
	./$(BUILD)/train $(CC_TRAIN_ARGS) --data=$(DATA) --out_dir=$(CC_DIR)/train > $(CC_DIR)/train.log
	$(PYTHON) tools/crosscheck.py eval --ckpt=$(CC_DIR)/train/ckpt.safetensors --data=$(DATA) --bin=$(BUILD)
	@echo "== 4. handgrad -> PyTorch -> handgrad is byte-identical"
	@for n in course gpt2_tied sinusoidal tanh_none; do \
	  $(PYTHON) tools/convert.py to-pytorch $(CC_DIR)/$$n.ckpt.safetensors -o $(CC_DIR)/rt-$$n.pt 2>/dev/null >/dev/null && \
	  $(PYTHON) tools/convert.py to-handgrad $(CC_DIR)/rt-$$n.pt -o $(CC_DIR)/rt-$$n.safetensors >/dev/null && \
	  cmp $(CC_DIR)/$$n.ckpt.safetensors $(CC_DIR)/rt-$$n.safetensors && echo "ok: $$n round trip byte-identical" || exit 1; \
	done
	@if $(PYTHON) tools/convert.py to-pytorch $(CC_DIR)/modern.ckpt.safetensors -o $(CC_DIR)/rt-modern.pt \
	  > $(CC_DIR)/rt-modern.log 2>&1; then echo "crosscheck: convert.py wrote a modern model in nanoGPT's format"; exit 1; fi
	@grep -q "cannot express" $(CC_DIR)/rt-modern.log && echo "ok: to-pytorch refuses what nanoGPT cannot express:" && cat $(CC_DIR)/rt-modern.log
	@echo "== 5. a nanoGPT ckpt.pt -> handgrad: build/sample --temperature=0 = PyTorch's greedy decoding"
	$(PYTHON) tools/crosscheck.py make-nanogpt --data=$(DATA) --out=$(CC_DIR)/nanogpt --iters=300
	$(PYTHON) tools/convert.py to-handgrad $(CC_DIR)/nanogpt/ckpt.pt -o $(CC_DIR)/nanogpt.safetensors
	$(PYTHON) tools/crosscheck.py sample --pt=$(CC_DIR)/nanogpt/ckpt.pt --meta=$(CC_DIR)/nanogpt/meta.pkl \
	  --ckpt=$(CC_DIR)/nanogpt.safetensors --bin=$(BUILD) --start="ROMEO:" --n=200
	$(PYTHON) tools/convert.py to-pytorch $(CC_DIR)/nanogpt.safetensors -o $(CC_DIR)/nanogpt-rt/ckpt.pt >/dev/null
	$(PYTHON) tools/convert.py to-handgrad $(CC_DIR)/nanogpt-rt/ckpt.pt -o $(CC_DIR)/nanogpt-rt.safetensors >/dev/null
	cmp $(CC_DIR)/nanogpt.safetensors $(CC_DIR)/nanogpt-rt.safetensors && echo "ok: nanoGPT model round trip byte-identical"
	@echo "== 6. Hugging Face GPT-2 checkpoints, each size's heads at reduced width (random weights): converted, logits against PyTorch"
	@$(foreach s,$(CC_HF_SIZES),\
	  $(PYTHON) tools/convert.py make-hf --size=$(s) --out=$(CC_DIR)/hf-$(s) $(CC_HF_$(s)) >/dev/null && \
	  $(PYTHON) tools/convert.py from-hf $(CC_DIR)/hf-$(s) -o $(CC_DIR)/hf-$(s).safetensors >/dev/null && \
	  $(PYTHON) tools/crosscheck.py hf --hf=$(CC_DIR)/hf-$(s) --ckpt=$(CC_DIR)/hf-$(s).safetensors --bin=$(BUILD) \
	    --gpt2_dir=$(GPT2_DIR) &&) true
	$(PYTHON) tools/crosscheck.py hf-errors --hf=$(CC_DIR)/hf-gpt2 --tmp=$(CC_DIR)
	@echo "== 7. make finetune end to end, from the converted gpt2-shaped model"
	$(MAKE) --no-print-directory finetune GPT2_CKPT=$(CC_DIR)/hf-gpt2.safetensors FINETUNE_DIR=$(CC_DIR)/finetune \
	  EXTRA="$(CC_FINETUNE_ARGS)" SAMPLE_TOKENS=20
	@echo "crosscheck: all passed"

# ---------------------------------------------------------------------------------------------
# handgrad as a library other programs link (docs/library.md).
#   make install [PREFIX=/usr/local] [DESTDIR=staging dir] [SHARED=0: the static library only]
#   make uninstall [PREFIX=...] [DESTDIR=...]   removes what the install's manifest lists
#   make example-check   apps/example/ built and run against an installed copy (tools/example_check.sh)
#
# The public headers: every header in lib/'s folders, except Highway's
# per-target fragments (*-inl.h: they compile only inside a foreach_target.h unit). The model,
# the trainer and the data pipeline are the entry points; the layers and kernels are public too,
# because building on them (a layer of one's own, a training loop of one's own) is what the
# library is for; and the rest are what those headers include. Each compiles on its own from the
# prefix (example-check tries every one).
#
# In the tree a header includes another as "lib/folder/x.h" (paths from the repository root, -I.).
# Installed, that line reads <handgrad/folder/x.h> (Cflags: -I$(PREFIX)/include): install rewrites the
# `#include "lib/` lines and nothing else, so the tree keeps one spelling for every include and
# the installed copy is the source with that prefix changed.
PREFIX      ?= /usr/local
SHARED      ?= 1
HG_VERSION  := 0.2.0
# The soname carries major.minor: before 1.0 no two minor versions promise the same ABI.
HG_SO       := libhandgrad.so.$(basename $(HG_VERSION))
HG_HEADERS  := $(filter-out %-inl.h,$(sort $(wildcard lib/*/*.h)))
HG_BUILT    := $(BUILD)/libhandgrad.a $(if $(filter 1,$(SHARED)),$(BUILD)/$(HG_SO))
# The shared library's objects: the same sources compiled position-independent, apart.
LIB_PIC_OBJ := $(LIB_SRC:%.cpp=$(BUILD)/obj-pic/%.o)
HG_MPI_LIBS := $(if $(filter 1,$(MPI)),$(filter-out -lmpi_cxx,$(shell mpicxx --showme:link)))

.PHONY: install uninstall example-check

$(BUILD)/obj-pic/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(CXXFLAGS) -fPIC -c $< -o $@
$(BUILD)/obj-pic/lib/process/dist.o: CPPFLAGS += $(MPI_CPPFLAGS)
$(BUILD)/obj-pic/lib/process/dist.o: $(BUILD)/mpi-$(MPI).stamp

# -z defs: every symbol the library uses resolves against the libraries named here, so a
# program linked to it needs nothing but -lhandgrad (and fmt, which the headers use).
$(BUILD)/$(HG_SO): $(LIB_PIC_OBJ)
	$(CXX) -shared -Wl,-soname,$(HG_SO) -Wl,-z,defs $(LDFLAGS) $^ -o $@ $(LDLIBS)

# tools/install.sh writes the files and the manifest of what it wrote (and uninstalls from it);
# handgrad.pc is lib/handgrad.pc.in with this build's prefix, version, OpenMP, OpenBLAS and MPI.
install:
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS)) $(HG_BUILT)
	@sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(HG_VERSION)|' -e 's|@BLASDIR@|$(BLAS_DIR)|g' \
	  -e 's|@OPENMP@|$(if $(filter 1,$(OPENMP)),$(OMP_LIBS) )|' \
	  -e 's|@MPI@|$(if $(HG_MPI_LIBS), $(HG_MPI_LIBS))|' -e 's|@ONEDNN@|$(if $(filter 1,$(ONEDNN)), -ldnnl)|' \
	  lib/handgrad.pc.in > $(BUILD)/handgrad.pc
	@PREFIX='$(PREFIX)' DESTDIR='$(DESTDIR)' HEADERS='$(HG_HEADERS)' LIBS='$(HG_BUILT)' \
	  PC=$(BUILD)/handgrad.pc bash tools/install.sh install

uninstall:
	@PREFIX='$(PREFIX)' DESTDIR='$(DESTDIR)' bash tools/install.sh uninstall

# The example as a user builds it, against an installed copy (tools/example_check.sh says what
# it checks): linked to the shared library, then (SHARED=0) to the static one.
example-check: build
	MAKE='$(MAKE)' BUILD=$(BUILD) CXX='$(CXX)' JOBS=$(JOBS) HG_WARN='$(filter -W%,$(CXXFLAGS))' \
	  bash tools/example_check.sh

-include $(LIB_PIC_OBJ:.o=.d)

# llm.c's own C code (a checkout at LLMC=PATH; without one the script says so and skips) reads
# handgrad's model file and debug state and checks them; the round trip through train_gpt2.c.
# GPT2_SMALL=0 leaves GPT-2 small's shape out (minutes of llm.c's steps on 2 cores).
GPT2_SMALL ?= 1
.PHONY: llmc-check
llmc-check: build data data-gpt2
	HANDGRAD_BIN=$(BUILD) GPT2_SMALL=$(GPT2_SMALL) bash tools/llmc_check.sh $(LLMC)

# ---------------------------------------------------------------------------------------------
# ARM64 under emulation (docs/platforms.md). The test binary cross-built for aarch64 (CROSS=, into
# ARM64_BUILD) against Debian's arm64 packages, and run by qemu-aarch64 with -cpu max, a CPU with
# NEON, SVE and SVE2 (SVE vectors of 512 bits): Highway dispatches to each of them in turn, so
# every kernel meets its scalar twin on every ARM target. ARM64_TESTS is the whole suite but the
# tests that start the apps as processes, the allocation counts (10 minutes under emulation),
# flash attention against today's at every preset's full shape (20 minutes under emulation; its
# kernels meet their twins on every target, and the odd shapes still run) and MPI
# (docs/platforms.md says why). Then the kernel tests again at SVE widths of 128, 256, 1024
# and 2048 bits (ARM64_SVE_WIDTHS): at 128 and 256 Highway adds its fixed-width SVE2_128 and
# SVE_256 targets, at 2048 a vector holds 64 floats.
ARM64_TRIPLET    := aarch64-linux-gnu
ARM64_BUILD      ?= build-arm64
ARM64_PKGS       := crossbuild-essential-arm64 qemu-user libopenblas-openmp-dev:arm64 libopenblas-dev:arm64 \
                    libhwy-dev:arm64 libfmt-dev:arm64 libpcre2-dev:arm64
ARM64_TESTS      ?= "~[apps]~[circuits]~[alloc]~[mpi]~[timing]~[preset_shapes]~[.]"
ARM64_WIDE_TESTS ?= "[simd]~[determinism],[platform]"
ARM64_SVE_WIDTHS ?= 128 256 1024 2048
QEMU_ARM64       ?= qemu-aarch64 -cpu max
.PHONY: deps-arm64 build-arm64 test-arm64

# The arm64 architecture added to dpkg (Debian multiarch), then what is missing installed.
deps-arm64: deps
	@SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then \
	  echo "adding the arm64 architecture to dpkg"; $$SUDO dpkg --add-architecture arm64 || exit 1; fi; \
	missing=$$(for p in $(ARM64_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:" $$missing; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

build-arm64: deps-arm64
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS)) CROSS=$(ARM64_TRIPLET) \
	  BUILD=$(ARM64_BUILD) $(ARM64_BUILD)/tests

# HANDGRAD_EXPECT_TARGETS: the [platform] test fails unless the binary dispatches to each of these.
test-arm64: build-arm64 data data-gpt2
	$(TEST_ENV) HANDGRAD_EXPECT_TARGETS=NEON,SVE,SVE2 HANDGRAD_EXPECT_SVE_BITS=512 OMP_NUM_THREADS=2 \
	  $(QEMU_ARM64),sve-default-vector-length=64 ./$(ARM64_BUILD)/tests --durations yes $(ARM64_TESTS) $(TEST_ARGS)
	@set -e; for w in $(ARM64_SVE_WIDTHS); do \
	  expect=NEON,SVE,SVE2; [ $$w = 128 ] && expect=$$expect,SVE2_128; [ $$w = 256 ] && expect=$$expect,SVE_256; \
	  echo "== SVE vectors of $$w bits: $(ARM64_WIDE_TESTS)"; \
	  $(TEST_ENV) HANDGRAD_EXPECT_TARGETS=$$expect HANDGRAD_EXPECT_SVE_BITS=$$w OMP_NUM_THREADS=2 \
	    $(QEMU_ARM64),sve-default-vector-length=$$(($$w / 8)) ./$(ARM64_BUILD)/tests $(ARM64_WIDE_TESTS) $(TEST_ARGS); \
	done

# ---------------------------------------------------------------------------------------------
# The README's set-up on fresh machines: a root of Debian 13 ("trixie", today's stable release)
# or Debian 12 ("bookworm") made by debootstrap from Debian's own mirror, with only
# build-essential, git, ca-certificates and sudo in it; this checkout copied in; then `make
# train` and `make test` run inside it, each installing what is missing as on any new machine
# (tools/fresh_debian.sh). As root, or through sudo. DEBIAN_GOALS picks the make goals.
DEBIAN_GOALS ?= train test
.PHONY: test-debian13 test-debian12
test-debian13:
	bash tools/fresh_debian.sh trixie build-debian13/root -- $(DEBIAN_GOALS)
test-debian12:
	bash tools/fresh_debian.sh bookworm build-debian12/root -- $(DEBIAN_GOALS)

clean:
	rm -rf build build-asan build-fuzz build-arm64

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(APP_SRC:%.cpp=$(BUILD)/obj/%.d)
