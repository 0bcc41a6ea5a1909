#!/usr/bin/env bash
# The wheels a lent GPU machine (no network; Python 3.12, a CUDA torch with Triton) needs for benchmarks/gpu_run.py
# beyond what it has: flash-linear-attention's kernels (fla-core; einops is there). Into .whl/, which git ignores
# (.git/info/exclude), to be carried with the call (docs/gpu.md, section 4).
#
#   bash benchmarks/gpu_wheels.sh [PYTHON_VERSION]     # default 3.12
set -euo pipefail
cd "$(dirname "$0")/.."
python_version=${1:-3.12}
[[ $python_version =~ ^3\.[0-9]+$ ]] || { echo "gpu_wheels: not a Python version: $python_version" >&2; exit 2; }
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" --implementation cp \
  --platform any --platform manylinux_2_28_x86_64 -d .whl "fla-core==0.6.0"
ls -l .whl
