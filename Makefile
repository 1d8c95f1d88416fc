# The two commands a newcomer runs: `make demo` and `make test`. Both set up a fresh machine.
BUILD ?= build
MODELS ?= $(BUILD)/models
JOBS ?= 2
PY := /usr/bin/python3

.PHONY: all setup configure build models test demo bench clean

all: build

setup:
	@scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@cmake --build $(BUILD) -j$(JOBS)

models: setup
	@$(PY) tests/models/gen_resnet.py --out $(MODELS)
	@$(PY) tests/models/gen_small.py --out $(MODELS)

test: build models
	@KILN_MODEL_DIR=$(abspath $(MODELS)) ctest --test-dir $(BUILD) -j$(JOBS) --output-on-failure

demo: build models
	@scripts/demo.sh $(BUILD) $(MODELS)

bench: build models
	@bench/vs_onnxruntime.sh $(BUILD) $(MODELS)

clean:
	rm -rf $(BUILD)
