#!/usr/bin/env bash
# Regenerates the runs and tables of docs/results/2026-12-01-vec-learning.md: PPO with 40 to 120 times the
# experience of the SB3 default experiment, on the batched engine, against its imitation teacher and the
# heuristics, on held-out seeds of the whole-gpu workload (hetero-64) and held-out windows of the Philly trace.
#
# COST: about 55 minutes on a 2-core CPU, run one section after the other (sb3 6 min, vec 7, vec-long 15,
# scratch 5, philly 12, table 8). Run folders go to runs/ (ignored by git); PYTHON selects the interpreter.
#
# Usage: bash docs/results/vec_learning.sh SECTION [SECTION ...]
#        bash docs/results/vec_learning.sh all     # every section, in order
#        bash docs/results/vec_learning.sh         # lists the sections
set -euo pipefail

cd "$(git rev-parse --show-toplevel)"
PYTHON=${PYTHON:-python}
HEURISTICS=fifo,fcfs+easy/pack,sjf+easy/topology,sjf+easy/pack,saf+easy/pack,fairshare+easy/pack,saf+greedy/topology
TEN_SEEDS=1000,1001,1002,1003,1004,1005,1006,1007,1008,1009

run() {  # a command, echoed first
    echo "+ $*"
    "$@"
}

sb3() {  # the SB3 default experiment (default.yaml: 40,000 PPO steps after imitation) on the whole-gpu workload
    run "$PYTHON" train.py --set workload=whole-gpu --set eval.workload=whole-gpu --no-progress \
        --run-dir runs/vec_study_sb3
}

vec() {  # vec_default.yaml as it stands: 1.6 M PPO steps on 256 batched clusters (40 times sb3's)
    run "$PYTHON" train.py --config configs/experiments/vec_default.yaml --no-progress --run-dir runs/vec_study_vec
}

vec_long() {  # three times longer: 4.9 M PPO steps (120 times sb3's)
    run "$PYTHON" train.py --config configs/experiments/vec_default.yaml --total-timesteps 4915200 \
        --set train.eval_every_steps=819200 --no-progress --run-dir runs/vec_study_long
}

scratch() {  # no warm start: PPO alone, 1.6 M steps, with an entropy bonus to explore
    mkdir -p runs
    sed '/^pretrain:/,/^ppo:/{/^ppo:/!d}' configs/experiments/vec_default.yaml > runs/vec_study_scratch.yaml
    run "$PYTHON" train.py --config runs/vec_study_scratch.yaml --set ppo.learning_rate=0.0003 \
        --set ppo.ent_coef=0.01 --no-progress --run-dir runs/vec_study_scratch
}

philly() {  # the Philly experiment on the batched engine; its final evaluation (four held-out windows) is the table
    run "$PYTHON" train.py --config configs/experiments/vec_philly.yaml --no-progress --run-dir runs/vec_study_philly
}

table() {  # every model of the sections above beside the heuristics, on ten held-out seeds of whole-gpu
    local models="" run
    for run in sb3 vec long scratch; do
        if [[ -f runs/vec_study_$run/model.zip ]]; then
            models+="runs/vec_study_$run/model.zip,"
        else
            echo "runs/vec_study_$run/model.zip missing: left out of the table" >&2
        fi
    done
    run "$PYTHON" evaluate.py --workload whole-gpu --cluster hetero-64 --seeds "$TEN_SEEDS" \
        --policies "$models$HEURISTICS" --out runs/vec_study_table --no-plots
}

SECTIONS=(sb3 vec vec_long scratch philly table)
if [[ $# -eq 0 ]]; then
    echo "sections: ${SECTIONS[*]} (or all)"
    exit 0
fi
[[ $1 == all ]] && set -- "${SECTIONS[@]}"
for section in "$@"; do
    "${section//-/_}"
done
