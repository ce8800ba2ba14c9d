# The two commands of the README: `make demo` trains the MNIST example
# (examples/mnist_mlp) and `make test` builds and runs the whole test suite. Both install what they
# need first (scripts/deps.sh).
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps test-deps build demo test test-sanitize test-tsan test-oom test-clang test-no-openmp fuzz install \
	clean

all: build

deps:
	@scripts/deps.sh

test-deps:
	@NABLA_DEPS_QUIET=1 scripts/deps.sh --test

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

demo: build
	./$(BUILD)/examples/mnist_mlp

test: test-deps build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The same suite under AddressSanitizer and UndefinedBehaviorSanitizer.
test-sanitize: test-deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DNABLA_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS)

# The suite under ThreadSanitizer, tests/test_threads.c above all (eager builders, static
# programs and one shared program, each in threads of their own), and with it every
# kernel that splits its work over the team of src/kernels/cpu/team.c.
# The allocation-failure walk over every k, in the ASan+UBSan build so that a
# bad read counts as a crash (tests/oom_walk.c says what each outcome means).
test-oom: test-deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DNABLA_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j$(JOBS) --target oom_walk
	UBSAN_OPTIONS=halt_on_error=1 ASAN_OPTIONS=detect_leaks=0 $(ASAN_BUILD)/tests/oom_walk

TSAN_BUILD ?= build-tsan
test-tsan: test-deps
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DNABLA_TSAN=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j$(JOBS)
	TSAN_OPTIONS=halt_on_error=1 ctest --test-dir $(TSAN_BUILD) --output-on-failure -j$(JOBS)

# The suite built with clang (-Werror, like gcc's build), when clang is installed, and run
# with NABLA_POISON=1: memory kernels get uninitialised is filled with NaN bytes, so a kernel
# flagged NB_OP_WRITES_ALL that skips an element fails its test. And with NABLA_BLAS=1: where
# nabla has a BLAS, the other suites' products mostly run on its own GEMM, and this one's on
# the BLAS (tests/test_gemm.c and test_ops_conv.c check both providers in every build).
CLANG_BUILD ?= build-clang
test-clang: test-deps
	@if command -v clang >/dev/null; then \
	  CC=clang cmake -S . -B $(CLANG_BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null && \
	  cmake --build $(CLANG_BUILD) -j$(JOBS) && NABLA_BLAS=1 NABLA_POISON=1 ctest --test-dir $(CLANG_BUILD) --output-on-failure -j$(JOBS); \
	else echo "test-clang: skipped, clang is not installed"; fi

# The build without OpenMP's simd pragmas (-DNABLA_USE_OPENMP=OFF), which
# must compile warning-free as well (a bare omp pragma is an unknown one
# there: src/kernels/cpu/simd.h's NB_OMP_SIMD), and the suites of the
# kernels it changes: the ops, the kernels and the GEMM.
NOOMP_BUILD ?= build-noomp
test-no-openmp: test-deps
	@cmake -S . -B $(NOOMP_BUILD) -DCMAKE_BUILD_TYPE=Release -DNABLA_USE_OPENMP=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(NOOMP_BUILD) -j$(JOBS)
	ctest --test-dir $(NOOMP_BUILD) --output-on-failure -j$(JOBS) -R 'test_ops|test_kernels|test_gemm'

# The libFuzzer harnesses of fuzz/ (one per loader), built with clang into
# $(FUZZ_BUILD) (CMake's NABLA_FUZZ), each run for FUZZ_SECONDS over seed
# corpora written by the library; fails on any crash, leak or hang found.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
fuzz: test-deps
	@fuzz/run.sh --check || { echo "fuzz: clang cannot link a libFuzzer harness" \
	  "(apt-get install clang libclang-rt-14-dev)"; exit 1; }
	@CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DNABLA_FUZZ=ON -DNABLA_BUILD_TESTS=OFF \
	  -DNABLA_USE_OPENMP=OFF $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(FUZZ_BUILD) -j$(JOBS) --target fuzzers
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX),)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(CLANG_BUILD) $(NOOMP_BUILD) $(FUZZ_BUILD)
