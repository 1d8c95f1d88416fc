#!/usr/bin/env bash
# Installs everything kiln needs to build and test on a fresh Debian 12 machine: the Debian
# packages DESIGN.md lists, and onnxruntime-node (the test oracle and benchmark peer) from npm.
# Idempotent: does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler
  libdnnl-dev ocl-icd-opencl-dev libflatbuffers-dev flatbuffers-compiler libxxhash-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-onnx python3-numpy python3-torch python3-torchvision libonnx-testdata
  python3-dev pybind11-dev python3-pybind11 python3-pytest python3-pil
  libxml2-utils
  clang clang-format libclang-rt-14-dev libomp-dev lld
  libvulkan-dev mesa-vulkan-drivers glslc spirv-tools vulkan-validationlayers
)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -d tools/ort/node_modules/onnxruntime-node ]; then
  echo "setup: installing onnxruntime-node (test oracle)"
  (cd tools/ort && ONNXRUNTIME_NODE_INSTALL=skip npm ci --no-audit --no-fund --loglevel=error)
fi
echo "setup: ok"
