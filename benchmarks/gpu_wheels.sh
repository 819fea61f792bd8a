#!/usr/bin/env bash
# Wheels the GPU machine lacks for benchmarks/gpu_check.py, into .whl/gpu_check (git-ignored via
# .git/info/exclude). That machine reaches no package registry; its image already holds torch,
# transformers, click, rich, psutil, jinja2 and hypothesis (the device tool's KINDS.md), but not
# expecttest, which PyTorch's OpInfo database (suite ops) imports.
#   bash benchmarks/gpu_wheels.sh        then run with carry [".whl/gpu_check"] and start the
#   command with: python3 -m pip install -q --no-index --no-deps --target /tmp/site \
#                   .whl/gpu_check/*.whl && export PYTHONPATH=/tmp/site;
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo /.whl/ >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp -d .whl/gpu_check "expecttest==0.3.0"
ls -l .whl/gpu_check
