#!/usr/bin/env bash
# The Python package installed as a user installs it (`cmake --install BUILD --prefix DIR`, which
# `make install PREFIX=DIR` runs), then imported by Debian's /usr/bin/python3:
#   1. the package lands in DIR/<KILN_PYTHON_INSTALL_DIR>/kiln, which for DIR=/usr/local is a
#      folder /usr/bin/python3 searches;
#   2. its extension finds the installed libkiln.so through its relative RPATH (never the build
#      tree, no LD_LIBRARY_PATH); kiln.compile makes the module the installed `kiln compile`
#      makes, and kiln.Session runs it as the installed `kiln run` does, bit for bit.
# usage: install_test.sh BUILD_DIR MODEL_DIR
set -euo pipefail
build=$(realpath "$1") models=$(realpath "$2")
python=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-python-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
package=$(dirname "$(find "$prefix" -path '*/kiln/_kiln*.so' | head -1)")
[ "$package" != . ] || fail "no kiln/_kiln*.so under $prefix"
site=$(dirname "$package")
relative=${site#"$prefix"/}
# 1. Under /usr/local the same relative folder is on Debian's Python's path.
"$python" -c "import sys; sys.exit('/usr/local/$relative' not in sys.path)" ||
  fail "$python does not search /usr/local/$relative (KILN_PYTHON_INSTALL_DIR)"
runpath=$(readelf -d "$package"/_kiln*.so | grep -E 'RUNPATH|RPATH' || true)
grep -q '\$ORIGIN' <<<"$runpath" || fail "the extension has no \$ORIGIN-relative RPATH: $runpath"
if grep -q "$build" <<<"$runpath"; then fail "the installed extension's RPATH names the build tree"; fi

# 2. Import from the installed tree only, compile and run tiny_cnn; compare with the installed
# kiln.
"$prefix/bin/kiln" compile "$models/small/tiny_cnn.onnx" -o "$work/tiny.kmod" >/dev/null
"$prefix/bin/kiln" run --module="$work/tiny.kmod" \
  --input="3x3x8x8xf32=@$models/small/tiny_input_b3.bin" --output="@$work/ref.bin" >/dev/null
cat >"$work/check.py" <<'EOF'
import os
import sys

import numpy as np

prefix, work, model, data = sys.argv[1:]
import kiln

assert kiln.__file__.startswith(prefix), f"imported {kiln.__file__}, not the installed package"
with open("/proc/self/maps") as f:
    libs = {line.split()[-1] for line in f if "libkiln.so" in line}
assert libs and all(p.startswith(prefix) for p in libs), f"libkiln.so loaded from {libs}"
module = kiln.compile(model)
with open(os.path.join(work, "tiny.kmod"), "rb") as f:
    assert module == f.read(), "kiln.compile and the installed kiln compile made different modules"
x = np.fromfile(data, np.float32).reshape(3, 3, 8, 8)
(out,) = kiln.Session(module).run([x])
with open(os.path.join(work, "ref.bin"), "rb") as f:
    assert out.tobytes() == f.read(), "the installed package differs from the installed kiln run"
print(f"kiln {kiln.version()} from {os.path.dirname(kiln.__file__)}, libkiln.so from {libs.pop()}")
EOF
env -u LD_LIBRARY_PATH PYTHONPATH="$site" "$python" "$work/check.py" "$prefix" "$work" \
  "$models/small/tiny_cnn.onnx" "$models/small/tiny_input_b3.bin" ||
  fail "the installed package did not compile and run tiny_cnn as the installed kiln does"
echo "python install_test: ok (prefix $prefix, package in $relative)"
