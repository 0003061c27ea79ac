#!/usr/bin/env bash
# Issue 33's GPU check, run from the repository root on the GPU machine:
#   bash benchmarks/gpu_check.sh [gpu_check.py options]
# Results go to $OUT (the folder the machine hands back), else benchmarks/out/gpu_check.
# The machine's python3 has torch with CUDA but not Pyro or ArviZ: the pure-Python wheels carried in .whl/
# (pyro-ppl, pyro-api, arviz, xarray-einstats, platformdirs) are installed into /tmp/site, and latentfs runs
# from the working tree (PYTHONPATH; no install needed, see the docstring of gpu_check.py).
set -uo pipefail
out_dir="${OUT:-benchmarks/out/gpu_check}"
mkdir -p "$out_dir"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
export PYTHONUNBUFFERED=1
{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv 2>&1
    python3 -c "import sys, torch; print(sys.version); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())" 2>&1
    python3 -c "import pyro, arviz; print('pyro', pyro.__version__, 'arviz', arviz.__version__)" 2>&1
} | tee "$out_dir/env.txt"
timeout "${GPU_CHECK_TIMEOUT:-500}" python3 benchmarks/gpu_check.py --out "$out_dir" "$@" 2>&1 | tee "$out_dir/log.txt"
