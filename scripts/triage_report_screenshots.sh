#!/usr/bin/env bash
# Screenshots of `kiln triage`'s HTML report at the widths users read it at (1400 and 1920 px),
# taken by headless Chromium (Debian's chromium package), for docs/triage.md: a NaN planted in a
# ResNet-50 v1 convolution, triaged against the float64 reference. Review the pictures: the whole
# verdict line shows at the top, the chart has its axis labels and legend.
# Usage: scripts/triage_report_screenshots.sh [BUILD_DIR] [MODEL_DIR]   (after `make models`)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
models=${2:-$build/models}
chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
  echo "triage_report_screenshots: needs chromium (apt-get install chromium)" >&2
  exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
KILN_FAULT=dispatch:resnetv17_stage3__plus2:nan "$build/tools/kiln" triage \
  "$models/resnet50-v1-12.onnx" "--input=1x3x224x224xf32=@$models/input_b1.bin" -o "$work/triage" \
  >/dev/null || status=$?
if [ "$status" -ne 1 ]; then
  echo "triage_report_screenshots: expected the planted NaN to be found (exit 1), got $status" >&2
  exit 1
fi
for width in 1400 1920; do
  "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size="$width,1000" --screenshot="docs/images/triage-report-$width.png" \
    "file://$work/triage/report.html" 2>/dev/null
  echo "docs/images/triage-report-$width.png"
done
