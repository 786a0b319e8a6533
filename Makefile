# handgrad — build, test, train.
#
#   make train   install what is missing, build, fetch tiny Shakespeare, train the course GPT, sample
#   make test    install what is missing, build, run the Catch2 suite (gradient checks first)
#   make asan    the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer (without MPI)
#   make plot    the pictures of a run (after make train; OUT_DIR=DIR for another run), PNGs in its out_dir
#   make train-mpi NP=2   the same training, data-parallel over NP processes with Open MPI
#   make test-mpi         the multi-process tests (2 ranks under mpirun)
#
# Layout: lib/**/*.cpp -> build/libhandgrad.a;  apps/X.cpp -> build/X;  tests/*.cpp -> build/tests

CXX      ?= g++
BUILD    ?= build
SAN      ?=
# -O3, never -Ofast/-ffast-math: finite differences and GELU's backward need IEEE floats.
# No -march=native: Highway compiles every x86 target itself and picks one at run time,
# so one binary uses AVX-512 here and still runs on an older x86-64.
OPT      ?= -O3
# -ffp-contract=off: no silent fusing of a*b+c into FMA, so a kernel gives the same bits on
# every SIMD target (AVX2 has FMA, SSE4 has not) and matches its scalar twin exactly.
CXXFLAGS ?= $(OPT) -g -std=c++17 -ffp-contract=off -Wall -Wextra -Wshadow -Wno-unused-parameter
CPPFLAGS += -I. -MMD -MP

# OpenMP (switch off with OPENMP=0): our own loops, and OpenBLAS too, because we link
# Debian's OpenMP build of OpenBLAS so both share one thread pool and never oversubscribe.
OPENMP ?= 1
ifeq ($(OPENMP),1)
  CXXFLAGS += -fopenmp
  LDFLAGS  += -fopenmp
  BLASDIR  := /usr/lib/x86_64-linux-gnu/openblas-openmp
else
  BLASDIR  := /usr/lib/x86_64-linux-gnu/openblas-pthread
endif
CPPFLAGS += -I/usr/include/x86_64-linux-gnu/$(notdir $(BLASDIR))
LDLIBS   += -L$(BLASDIR) -Wl,-rpath,$(BLASDIR) -lopenblas -lhwy -lhwy_contrib -lfmt -lm

# MPI (switch off with MPI=0): data-parallel training across processes, when Open MPI's
# compiler wrapper is installed (`make deps-mpi` installs it; the normal build never needs it).
# Only lib/dist.cpp sees <mpi.h> (C API only: OMPI_SKIP_MPICXX); without MPI it compiles its one-process versions. Every
# binary links libmpi then, but starts MPI only when launched by mpirun (lib/dist.h).
MPI ?= $(if $(shell command -v mpicxx 2>/dev/null),1,0)
ifeq ($(MPI),1)
  MPI_CPPFLAGS := -DHANDGRAD_MPI -DOMPI_SKIP_MPICXX $(shell mpicxx --showme:compile)
  LDLIBS       += $(filter-out -lmpi_cxx,$(shell mpicxx --showme:link))
endif

ifneq ($(SAN),)
  CXXFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS  += -fsanitize=address,undefined
endif

LIB_SRC  := $(sort $(wildcard lib/*.cpp lib/*/*.cpp))
APP_SRC  := $(sort $(wildcard apps/*.cpp))
TEST_SRC := $(sort $(wildcard tests/*.cpp))
LIB_OBJ  := $(LIB_SRC:%.cpp=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.cpp=$(BUILD)/obj/%.o)
APPS     := $(APP_SRC:apps/%.cpp=$(BUILD)/%)

# Everything the build and the tools need, as Debian packages (installed by `make deps`).
DEB_PKGS := g++ make pkg-config libopenblas-dev libopenblas-openmp-dev libhwy-dev catch2 \
            libfmt-dev nlohmann-json3-dev libcli11-dev curl ca-certificates
MPI_PKGS := libopenmpi-dev openmpi-bin

SHARED_DATA ?= ../shared/data/tinyshakespeare.txt
DATA        := data/tinyshakespeare/input.txt
OUT_DIR     ?= out-shakespeare-char
THREADS     ?= $(shell nproc)
JOBS        ?= $(shell nproc)

.PHONY: all deps deps-mpi build test test-mpi asan train train-mpi sample bench plot data clean
.DEFAULT_GOAL := all
all: build

# Install only what is missing; as root directly, otherwise through sudo.
deps deps-mpi:
	@missing=$$(for p in $(if $(filter deps-mpi,$@),$(MPI_PKGS),$(DEB_PKGS)); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
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

# dist.o alone is compiled with MPI, and again whenever MPI is switched on or off.
$(BUILD)/obj/lib/dist.o: CPPFLAGS += $(MPI_CPPFLAGS)
$(BUILD)/obj/lib/dist.o: $(BUILD)/mpi-$(MPI).stamp
$(BUILD)/mpi-$(MPI).stamp:
	@mkdir -p $(BUILD) && rm -f $(BUILD)/mpi-*.stamp && touch $@

$(BUILD)/libhandgrad.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%: $(BUILD)/obj/apps/%.o $(BUILD)/libhandgrad.a
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests: $(TEST_OBJ) $(BUILD)/libhandgrad.a
	$(CXX) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# The suite: gradient checks, kernels against their scalar twins, model, training, apps.
# HANDGRAD_DATA points the tests at tiny Shakespeare (tests that need it skip without it).
# HANDGRAD_BIN tells the app tests which build's binaries to run.
test: build
	HANDGRAD_DATA=$(abspath $(SHARED_DATA)) HANDGRAD_BIN=$(BUILD) OMP_NUM_THREADS=$(THREADS) \
	  ./$(BUILD)/tests --durations yes $(TEST_ARGS)

# The same suite, apps included, built with AddressSanitizer + UndefinedBehaviorSanitizer.
asan: deps
	@$(MAKE) --no-print-directory $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(JOBS)) BUILD=build-asan SAN=1 OPT=-O1 MPI=0 \
	  $(APP_SRC:apps/%.cpp=build-asan/%) build-asan/tests
	HANDGRAD_DATA=$(abspath $(SHARED_DATA)) HANDGRAD_BIN=build-asan ASAN_OPTIONS=detect_leaks=0 \
	  UBSAN_OPTIONS=print_stacktrace=1 OMP_NUM_THREADS=$(THREADS) ./build-asan/tests $(TEST_ARGS)

# The main job: nanoGPT's CPU recipe for the course model on tiny Shakespeare, then the
# whole-val-split loss and a sample.
TRAIN_ARGS ?= --preset=course --batch_size=12 --block_size=64 --max_iters=2000 --lr_decay_iters=2000 \
              --learning_rate=1e-3 --min_lr=1e-4 --warmup_iters=100 --beta2=0.99 --dropout=0 \
              --eval_interval=250 --eval_iters=20 --log_interval=50
train: build data
	./$(BUILD)/train $(TRAIN_ARGS) --data=$(DATA) --out_dir=$(OUT_DIR) $(EXTRA)
	./$(BUILD)/eval --ckpt=$(OUT_DIR)/ckpt.safetensors --data=$(DATA) --split=val
	./$(BUILD)/sample --out_dir=$(OUT_DIR) --max_new_tokens=500

# Data-parallel: the same recipe on NP processes (Open MPI, installed if missing), the course's
# batch of 12 split over the ranks (12 / NP rows each), so the effective batch stays 12 and the
# run is the single-process one computed in NP pieces. Each rank gets cores / NP threads and is
# pinned to that many cores of its own (more ranks than cores: oversubscribed, unpinned).
# More hosts: see the README ("Several processes, several machines").
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
test-mpi: deps-mpi
	@$(MAKE) --no-print-directory build MPI=1
	HANDGRAD_DATA=$(abspath $(SHARED_DATA)) HANDGRAD_BIN=$(BUILD) OMP_NUM_THREADS=1 \
	  ./$(BUILD)/tests "[mpi]" $(TEST_ARGS)

# handgrad against the same step in PyTorch (Debian's python3-torch), side by side.
PYTHON ?= /usr/bin/python3
bench: build
	@dpkg-query -W -f='$${Status}\n' python3-torch 2>/dev/null | grep -q '^install ok installed' || \
	  ( SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); $$SUDO apt-get install -y -qq python3-torch >/dev/null )
	HANDGRAD_BIN=$(BUILD) $(PYTHON) tools/bench.py $(BENCH_RUNS)

# The pictures of a run, PNGs in OUT_DIR: loss curves, parameters per component, attention of
# every head, logits and causality, residual-stream norms (tools/plot.py, Debian's matplotlib).
PLOT_ARGS ?=
plot: build
	@dpkg-query -W -f='$${Status}\n' python3-matplotlib 2>/dev/null | grep -q '^install ok installed' || \
	  ( SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); $$SUDO apt-get install -y -qq python3-matplotlib >/dev/null )
	HANDGRAD_BIN=$(BUILD) $(PYTHON) tools/plot.py $(OUT_DIR) $(PLOT_ARGS)

sample: build
	./$(BUILD)/sample --out_dir=$(OUT_DIR) $(EXTRA)

data: $(DATA)
$(DATA):
	@bash data/tinyshakespeare/prepare.sh $(SHARED_DATA)

clean:
	rm -rf build build-asan

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(APP_SRC:%.cpp=$(BUILD)/obj/%.d)
