#!/usr/bin/env bash
# kiln installed as a user installs it, and used as an embedding program uses it:
#   1. `cmake --install BUILD --prefix TMP` puts everything under TMP (libraries, header, kiln,
#      CMake package, pkg-config files);
#   2. examples/c builds against the installed tree with find_package(kiln) and with pkg-config,
#      never the build tree, and its outputs equal `kiln run`'s byte for byte;
#   3. the runtime-only program needs libkiln_runtime.so and neither libkiln.so, protobuf nor
#      ONNX; both libraries export only kiln_* functions, versioned KILN_1.
# usage: install_test.sh BUILD_DIR SOURCE_DIR MODEL_DIR
set -euo pipefail
build=$(realpath "$1") source=$(realpath "$2") models=$(realpath "$3")
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
libdir=$(dirname "$(find "$prefix" -name 'libkiln_runtime.so' | head -1)")
[ -n "$libdir" ] || fail "no libkiln_runtime.so under $prefix"
for f in "$libdir/libkiln.so.0" "$libdir/libkiln_runtime.so.0" "$prefix/include/kiln/kiln.h" \
         "$prefix/bin/kiln" "$libdir/cmake/kiln/kilnConfig.cmake" \
         "$libdir/pkgconfig/kiln.pc" "$libdir/pkgconfig/kiln_runtime.pc"; do
  [ -e "$f" ] || fail "'cmake --install --prefix' did not install $f"
done
if grep -q "$build" "$libdir/cmake/kiln/"*.cmake "$libdir/pkgconfig/"*.pc; then
  fail "the installed CMake package or .pc files refer to the build tree"
fi

# The module and the reference outputs, by the installed kiln.
"$prefix/bin/kiln" compile "$models/small/tiny_cnn.onnx" -o "$work/tiny.kmod" >/dev/null
"$prefix/bin/kiln" run --module="$work/tiny.kmod" \
  --input="3x3x8x8xf32=@$models/small/tiny_input_b3.bin" --output="@$work/ref.bin" >/dev/null

# 2a. CMake: find_package(kiln) from the installed tree only.
cmake -S "$source/examples/c" -B "$work/example" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/example.log" || { cat "$work/example.log"; fail "configure"; }
cmake --build "$work/example" >>"$work/example.log" || { cat "$work/example.log"; fail "build"; }
"$work/example/run_module" "$work/tiny.kmod" N=3 "@$models/small/tiny_input_b3.bin" \
  --out "$work/cmake_out_" >"$work/run.log" || { cat "$work/run.log"; fail "run_module (CMake)"; }
grep -q "input 0 'data' f32 \[N,3,8,8\]" "$work/run.log" || fail "run_module did not list the input"
cmp "$work/cmake_out_0.bin" "$work/ref.bin" || fail "run_module (CMake) differs from kiln run"

# 2b. pkg-config.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c99 -Wall -Wextra -pedantic -Werror "$source/examples/c/run_module.c" \
  $(pkg-config --cflags --libs kiln_runtime) -o "$work/run_module_pc"
LD_LIBRARY_PATH="$libdir" "$work/run_module_pc" "$work/tiny.kmod" N=3 \
  "@$models/small/tiny_input_b3.bin" --out "$work/pc_out_" >/dev/null
cmp "$work/pc_out_0.bin" "$work/ref.bin" || fail "run_module (pkg-config) differs from kiln run"

# 3. What the runtime-only program and the libraries pull in and export.
needed=$(readelf -d "$work/run_module_pc" | grep NEEDED)
grep -q 'libkiln_runtime.so.0' <<<"$needed" || fail "run_module does not need libkiln_runtime.so.0"
if grep -q 'libkiln.so' <<<"$needed"; then fail "run_module needs libkiln.so"; fi
closure=$(LD_LIBRARY_PATH="$libdir" ldd "$work/run_module_pc")
if grep -Eq 'libprotobuf|libonnx' <<<"$closure"; then
  fail "the runtime-only program loads protobuf or ONNX:\n$closure"
fi
grep -q libprotobuf <<<"$(readelf -d "$libdir/libkiln.so.0")" ||
  fail "libkiln.so (with the compiler) should need protobuf; is the check looking at the right file?"
for lib in libkiln.so.0 libkiln_runtime.so.0; do
  exports=$(nm -D --defined-only "$libdir/$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}')
  [ -n "$exports" ] || fail "$lib exports nothing"
  stray=$(grep -v '^kiln_.*@@KILN_1$' <<<"$exports" || true)
  [ -z "$stray" ] || fail "$lib exports more than the versioned C API: $(head -5 <<<"$stray")"
done
grep -q kiln_compile_file <<<"$(nm -D --defined-only "$libdir/libkiln.so.0")" ||
  fail "libkiln.so lacks kiln_compile_file"
if grep -q kiln_compile <<<"$(nm -D --defined-only "$libdir/libkiln_runtime.so.0")"; then
  fail "libkiln_runtime.so exports the compiler"
fi
echo "install_test: ok (prefix $prefix; CMake and pkg-config builds equal kiln run)"
