#!/usr/bin/env bash
# CUDA vs CPU for the agents (one prepared run for a machine with a CUDA GPU; about 10 minutes on 16 cores).
#
#   OUT=runs/cuda_vs_cpu bash benchmarks/cuda_vs_cpu.sh
#
# 1. the agents' tests, on whatever device torch finds (the CUDA test runs instead of skipping);
# 2. benchmarks/train_profile.py on cpu and cuda: rollout (env + inference) and update seconds, steps/s, peak
#    GPU memory, for a small and a wide network at two batch sizes;
# 3. the default experiment (configs/experiments/default.yaml) trained once on cuda and once on cpu, same seed
#    and envs: steps/s and the final evaluation table of each.
# Everything it prints is also written under $OUT (profile.jsonl, train_cuda.txt, train_cpu.txt, pytest.txt).
set -euo pipefail
OUT=${OUT:-runs/cuda_vs_cpu}
N_ENVS=${N_ENVS:-8}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" | tee "$OUT/device.txt"
python3 -m pytest -q -p no:warnings tests/test_agents.py 2>&1 | tee "$OUT/pytest.txt"
python3 benchmarks/train_profile.py --devices cpu,cuda --n-envs 1,"$N_ENVS" --hidden 64,256 \
    --batch-size 256,2048 --steps 16384 2>&1 | tee "$OUT/profile.jsonl"
for device in cuda cpu; do
    python3 train.py --device "$device" --n-envs "$N_ENVS" --run-dir "$OUT/train_$device" 2>&1 \
        | grep -v "run/s\]" | tee "$OUT/train_$device.txt"
done
