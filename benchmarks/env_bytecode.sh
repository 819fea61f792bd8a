#!/bin/bash
# What compiling an environment's bytecode at build time buys (matrix/envs.py BYTECODE):
# two uv environments of torch 2.13.0 + transformers 5.24.0 (from /opt/wheels and the local
# indexes), one installed without and one with --compile-bytecode; each then imports torch
# and transformers and builds a small llama twice, in new processes, with this shell's
# PYTHONDONTWRITEBYTECODE (printed).
#
#   bash benchmarks/env_bytecode.sh > docs/results/env_bytecode.txt
#
# UV_CACHE_DIR: uv's cache (a warm one times the install, not the download).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
uv=$("$here/.venv/bin/python" -c "import uv; print(uv.find_uv_bin())")
work=$(mktemp -d /tmp/torchport-bytecode-XXXX)
trap 'rm -rf "$work"' EXIT
idx=(--find-links /opt/wheels --extra-index-url file:///opt/pypi/simple
     --extra-index-url file:///opt/pypi-more/simple --index-strategy unsafe-best-match)
probe='import time; t = time.time(); import torch
from transformers import AutoConfig, AutoModelForCausalLM
AutoModelForCausalLM.from_config(AutoConfig.for_model("llama", hidden_size=64,
    intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, vocab_size=256))
print(f"{time.time() - t:.1f} s")'
echo "+ bash benchmarks/env_bytecode.sh"
echo "PYTHONDONTWRITEBYTECODE=${PYTHONDONTWRITEBYTECODE:-} (unset: each first import writes .pyc files)"
for flag in "" "--compile-bytecode"; do
    env="$work/env${flag:+-bytecode}"
    "$uv" venv -q --python "$here/.venv/bin/python" "$env"
    echo
    echo "install ${flag:-(no flag)}: load before: $(uptime)"
    start=$(date +%s.%N)
    "$uv" pip install -q $flag --python "$env/bin/python" "${idx[@]}" torch==2.13.0 transformers==5.24.0
    echo "  install: $(echo "$(date +%s.%N) - $start" | bc | cut -c1-5) s"
    for n in 1 2; do
        echo "  import torch + transformers, build a small llama, process $n: $("$env/bin/python" -c "$probe" 2>/dev/null)"
    done
    echo "  load after: $(uptime)"
done
