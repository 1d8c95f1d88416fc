# The two commands a newcomer runs: `make demo` and `make test`. Both set up a fresh machine.
BUILD ?= build
MODELS ?= $(BUILD)/models
JOBS ?= 2
PY := /usr/bin/python3

FUZZ_SECONDS ?= 60
# The fraction of the shape fuzzer's graphs (docs/shape-fuzz.md) that get a NaN planted in their
# first input: in `make fuzz` and in `make test`'s small run (shape_fuzz_smoke, via CMake).
SHAPE_FUZZ_PLANT_NAN ?= 0.25

.PHONY: all setup configure build models models-qdq-resnet bench-models test test-gpu suite demo bench sanitize fuzz install clean

all: build

setup:
	@scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_WERROR=ON \
	  -DKILN_SHAPE_FUZZ_PLANT_NAN=$(SHAPE_FUZZ_PLANT_NAN) >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

models: setup
	@$(PY) tests/models/gen_resnet.py --out $(MODELS)
	@$(PY) tests/models/gen_small.py --out $(MODELS)
	@$(PY) tests/models/gen_models.py --out $(MODELS)
	@$(PY) tests/models/gen_torch_models.py --out $(MODELS)
	@$(PY) tests/models/gen_qdq_models.py --out $(MODELS)

# The QDQ (int8) ResNet-50 from the float replica with ONNX Runtime's int8 outputs: about a minute,
# so not in `make models`; `make bench` (its int8 part) uses it.
models-qdq-resnet: models
	@$(PY) tests/models/gen_qdq_resnet.py --models $(MODELS)

# The generated models of the benchmark corpus (bench/corpus_models.py: BERT-base- and GPT-2-small-
# style transformers at opsets 14 and 17, ViT-B/16, MobileNetV2, EfficientNet-B0, a tf2onnx-style
# NHWC CNN) in $(MODELS)/bench: 3 GB, 10-25 minutes on 2 cores, regenerated only when a generator
# changes. `make bench` uses them.
bench-models: setup
	@$(PY) bench/corpus_models.py --out $(MODELS)

# ctest runs with TMPDIR in a folder of its own that must be empty afterwards
# (scripts/no_leftovers.sh): a test that leaves its scratch files behind fails the run.
test: build models
	@KILN_MODEL_DIR=$(abspath $(MODELS)) scripts/no_leftovers.sh $(BUILD)/test-tmp -- \
	  ctest --test-dir $(BUILD) -j$(JOBS) --output-on-failure

# The GPU checks that are too slow for `make test` where the GPU is lavapipe (ResNet-50 on the
# Vulkan device at N = 1, 2, 3; triage of a fault planted in a GPU conv): scripts/test_gpu.sh.
# GPU_DEVICE=vulkan:N picks another Vulkan device (kiln devices lists them).
GPU_DEVICE ?= vulkan
test-gpu: build models
	@scripts/test_gpu.sh $(BUILD) $(abspath $(MODELS)) $(GPU_DEVICE)

demo: build models
	@scripts/demo.sh $(BUILD) $(MODELS)

# kiln's model suite alone (also part of `make test`), with its JUnit file and an HTML report.
suite: build models
	@$(BUILD)/tools/kiln test-suite tests/suite/kiln_models.json --model-dir $(abspath $(MODELS)) \
	  -j$(JOBS) --junit $(BUILD)/kiln_models.junit.xml --report $(BUILD)/kiln_models_report.html

# kiln against ONNX Runtime (bench/vs_onnxruntime.py): the ResNets, int8, fp16, the benchmark
# corpus (checked first: a wrong output fails the run) and the threads-under-load part.
# BENCH_ARGS adds options, e.g. BENCH_ARGS=--quick (minutes) or BENCH_ARGS='--isa avx2'.
BENCH_PAIRS ?= 10
BENCH_THREADS ?= 2
BENCH_ARGS ?=
bench: build models models-qdq-resnet bench-models
	@bench/vs_onnxruntime.sh $(BUILD) $(MODELS) $(BENCH_PAIRS) $(BENCH_THREADS) -- $(BENCH_ARGS)

# The unit and conformance tests again, built by clang with AddressSanitizer +
# UndefinedBehaviorSanitizer (scripts/hardened_build.sh; the same build `make fuzz` uses), each
# GoogleTest program run whole as one test. Left out: the tests that run the ResNet-50 models
# (kiln's model suite here, the programs' cases by the GoogleTest filter KILN_GTEST_EXCLUDE in
# scripts/hardened_build.sh): they take tens of minutes under ASan, and the small models exercise
# the same code. The tests that load kiln's shared libraries into a program built without ASan
# (the installed C example, the Python interpreter): ASan must be linked into the executable
# itself. The Vulkan device's ONNX conformance run and its shader-mutant run: their host code is
# the one kiln_hal_vulkan_test runs under the sanitizers, and they would add minutes of lavapipe.
# The runs that show the conformance harness fails a deliberately broken kernel: they check the
# harness's verdict, and onnx_conformance_cpu runs the same code under ASan. The format checks,
# which run clang-format and no kiln code.
SANITIZE_EXCLUDE ?= kiln_models_suite|install_tree_embeds|python_|onnx_conformance_vulkan|vulkan_mutant_|onnx_conformance_catches_broken_|^format_check
# Then the C program whose 8 threads share one session, built with ThreadSanitizer
# (scripts/thread_sanitizer_build.sh: the runtime's side only, in $(BUILD)-tsan).
sanitize: build models
	@JOBS=$(JOBS) scripts/hardened_build.sh $(BUILD)-fuzz
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  LSAN_OPTIONS=suppressions=$(abspath scripts/lsan_suppressions.txt) \
	  KILN_MODEL_DIR=$(abspath $(MODELS)) scripts/no_leftovers.sh $(BUILD)-fuzz/test-tmp -- \
	  ctest --test-dir $(BUILD)-fuzz -j$(JOBS) --output-on-failure -E '$(SANITIZE_EXCLUDE)'
	@JOBS=$(JOBS) scripts/thread_sanitizer_build.sh $(BUILD)-tsan $(BUILD)/tools/kiln $(MODELS)

# libFuzzer targets (clang), each run for FUZZ_SECONDS on seeds made from the test models; then
# kiln's shape fuzzer (docs/shape-fuzz.md) for FUZZ_SECONDS on up to SHAPE_FUZZ_COUNT graphs.
# SHAPE_FUZZ_PLANT_NAN of the graphs get a NaN in their first input, here and in `make test`'s
# small run (shape_fuzz_smoke).
SHAPE_FUZZ_SEED ?= 2
SHAPE_FUZZ_COUNT ?= 5000
SHAPE_FUZZ_MAX_REFUSED ?= 0.04
fuzz: build models
	@JOBS=$(JOBS) scripts/fuzz.sh $(BUILD)-fuzz $(MODELS) $(BUILD)/tools/kiln $(FUZZ_SECONDS)
	@$(PY) tests/fuzz/shapes/shape_fuzz.py --kiln $(BUILD)/tools/kiln --seed $(SHAPE_FUZZ_SEED) \
	  --count $(SHAPE_FUZZ_COUNT) --seconds $(FUZZ_SECONDS) --batch 20 --work $(BUILD)/shape-fuzz \
	  --json $(BUILD)/shape-fuzz.json --max-refused-fraction $(SHAPE_FUZZ_MAX_REFUSED) \
	  --plant-nan $(SHAPE_FUZZ_PLANT_NAN)

# Installs kiln under PREFIX: the kiln command, libkiln.so and libkiln_runtime.so with
# include/kiln/kiln.h, the CMake package and pkg-config files, and the Python package into
# PREFIX/lib/python3.X/dist-packages (for PREFIX=/usr/local, where Debian's /usr/bin/python3
# finds it). docs/embedding.md says how to use each.
PREFIX ?= /usr/local
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
