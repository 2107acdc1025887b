#!/usr/bin/env bash
# The batched engine and the torch PPO loop on a CUDA machine: one prepared run (about 12 minutes on one GPU and
# 16 cores).
#
#   OUT=runs/device_check bash benchmarks/device_check.sh
#
# 1. the batched engine's and the torch loop's tests, on whatever device torch finds (the CUDA cases run
#    instead of being left out): exactness against the event env with 1 and 64 clusters on CUDA;
# 2. benchmarks/bench_vec.py on CUDA: env-only steps/s for N = 1 ... 16,384 beside the event env, the breakdown of
#    a step, and PPO steps/s of the torch loop beside SB3 MaskablePPO;
# 3. configs/experiments/vec_default.yaml trained for about 3 minutes of PPO on CUDA (1,024 clusters) and on the
#    CPU (64 clusters), same seed: steps/s, peak GPU memory and the final evaluation table of each.
# 4. each heuristic-selection recipe (configs/experiments/select_*.yaml) for one short iteration with its network
#    updates on CUDA (about a minute each: the simulator runs on the CPU).
# Everything it prints is also written under $OUT (pytest.txt, bench_vec.jsonl, train_cuda.txt, train_cpu.txt,
# select_rollout.txt, select_group_ppo.txt).
# On a machine whose python3 lacks gymnasium, stable-baselines3 or sb3-contrib, install their wheels first
# (PYTHONPATH pointing at them).
set -euo pipefail
OUT=${OUT:-runs/device_check}
CUDA_STEPS=${CUDA_STEPS:-3000000}
CPU_STEPS=${CPU_STEPS:-600000}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(),
torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" | tee "$OUT/device.txt"
python3 -m pytest -q -p no:warnings tests/test_vec_exact.py tests/test_ppo_torch.py 2>&1 | tee "$OUT/pytest.txt"
python3 benchmarks/bench_vec.py --device cuda --sizes 1,64,1024,4096,16384 --ppo-sizes 64,256,1024,4096 --threads 16 2>&1 \
    | tee "$OUT/bench_vec.jsonl"
python3 train.py --config configs/experiments/vec_default.yaml --device cuda --n-envs 1024 \
    --total-timesteps "$CUDA_STEPS" --set train.eval_every_steps=1048576 --no-progress \
    --run-dir "$OUT/train_cuda" 2>&1 | tee "$OUT/train_cuda.txt"
python3 train.py --config configs/experiments/vec_default.yaml --device cpu --threads 16 \
    --total-timesteps "$CPU_STEPS" --no-progress --run-dir "$OUT/train_cpu" 2>&1 | tee "$OUT/train_cpu.txt"
python3 train.py --config configs/experiments/select_rollout.yaml --device cuda --set rollout.iterations=1 \
    --set rollout.episodes=1 --set rollout.futures=2 --run-dir "$OUT/select_rollout" 2>&1 | tee "$OUT/select_rollout.txt"
python3 train.py --config configs/experiments/select_group_ppo.yaml --device cuda --set group_ppo.iterations=2 \
    --set group_ppo.groups=1 --set group_ppo.validate_every=2 --run-dir "$OUT/select_group_ppo" 2>&1 \
    | tee "$OUT/select_group_ppo.txt"
