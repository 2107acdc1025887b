#!/usr/bin/env bash
# Regenerates the rows of docs/results/2026-11-30-rlscheduler-lublin.md: RLScheduler's Lublin benchmark
# (lublin_256.swf, the peer's 10 test sequences of 1024 jobs, mean of the per-sequence average bounded slowdowns).
#
# COST: the whole study takes many CPU-hours. It has about 75 training runs of 300k to 1M steps; on a 2-core CPU a
# 300k-step run takes 8.5-20 minutes and the 600k, 900k and 1M runs proportionally longer, and the scoring sections
# then score several hundred saved models. Run one section at a time.
#
# REMOVED CODE: the sections named removed-* (and lookahead) train with code that was later removed. Each runs only
# with its commit checked out (the section says which and refuses any other). That commit does not contain this
# script, so copy it and sections.sh out of the tree first, e.g. (from the repository root)
#   cp docs/results/{rlscheduler_lublin,sections}.sh .. && git checkout 0394169 && \
#       bash ../rlscheduler_lublin.sh removed-critic
# The other sections run at f62e0b9 (later commits may rename flags).
#
# Rows whose command was not recorded (A4, A6, C10, C11, C12, C43) appear below as comments only. Runs that were
# stopped by hand in the study (C41, C42) run only with RUN_STOPPED=1, and must be stopped by hand at the step count
# the page gives (the page reports no score for them).
#
# Usage: bash docs/results/rlscheduler_lublin.sh SECTION [SECTION ...]
#        bash docs/results/rlscheduler_lublin.sh all     # every section that runs at f62e0b9, in order
#        bash docs/results/rlscheduler_lublin.sh         # lists the sections
# Run folders go to runs/ (ignored by git); PYTHON selects the interpreter (default: python).
set -euo pipefail

SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # where this script and sections.sh are
cd "$(git rev-parse --show-toplevel)"
PYTHON=${PYTHON:-python}
TRACE=../shared/traces/lublin-synthetic/lublin_256.swf
LUBLIN=configs/experiments/lublin.yaml
IMITATION=configs/experiments/lublin_imitation.yaml
DAGGER=(--set pretrain.teacher=f1/sjf@0.5 --set pretrain.dagger_rounds=2)   # f1/sjf@0.5 with 2 DAgger rounds
# the 12 validation sequences of 512 jobs that benchmarks/peer_checkpoints.py --validation 12 draws (seed 7)
VALIDATION_STARTS=582,799,876,895,1248,1305,1381,6282,6356,6412,6435,6493

train() {  # python train.py ARGS..., echoed first
    echo "+ $PYTHON train.py $*"
    "$PYTHON" train.py "$@"
}

stopped_run() {  # a run stopped by hand in the study: only with RUN_STOPPED=1
    if [[ ${RUN_STOPPED:-0} == 1 ]]; then
        "$@"
    else
        echo "skipped (stopped by hand in the study; RUN_STOPPED=1 runs it): $*"
    fi
}

need_commit() {  # the section's code lives only at commit $1
    local head
    head=$(git rev-parse HEAD)
    if [[ $head != "$1"* ]]; then
        echo "this section needs commit $1 checked out (HEAD is ${head:0:7}); skipped" >&2
        return 1
    fi
}

have_runs() {  # true when every run folder among the arguments holds a model.zip
    local arg missing=0
    for arg in "$@"; do
        if [[ $arg == runs/* && ! -f $arg/model.zip ]]; then
            echo "missing $arg/model.zip (run its training section first)" >&2
            missing=1
        fi
    done
    return "$missing"
}

checkpoints() {  # benchmarks/peer_checkpoints.py ARGS..., when the run folders exist
    if have_runs "$@"; then
        echo "+ $PYTHON benchmarks/peer_checkpoints.py $*"
        "$PYTHON" benchmarks/peer_checkpoints.py "$@"
    fi
}

sampling() {  # benchmarks/peer_sampling.py MODEL.zip ... --draws 3, when the models exist
    local arg
    for arg in "$@"; do
        if [[ $arg == runs/* && ! -f $arg ]]; then
            echo "missing $arg (run its training section first); skipped" >&2
            return 0
        fi
    done
    echo "+ $PYTHON benchmarks/peer_sampling.py $*"
    "$PYTHON" benchmarks/peer_sampling.py "$@"
}

peer_eval() {  # evaluate.py on the peer protocol: peer_eval OUT POLICIES [more evaluate.py flags]
    local out=$1 policies=$2
    shift 2
    echo "+ $PYTHON evaluate.py --suite rlscheduler --workload swf:$TRACE --policies $policies --out $out $*"
    "$PYTHON" evaluate.py --suite rlscheduler --workload "swf:$TRACE" --policies "$policies" --out "$out" \
        --no-plots "$@"
}

# ---------------------------------------------------------------------------------------------------------------
# The run table. Each training run ends with the final evaluation that prints its `ours, last` and `ours, best`.

nobf_anywhere() {  # rows A1-A8: no backfilling, trained on sequences anywhere
    local n
    for n in 0 1; do  # A1, A2: F1 warm start (recorded at 7545c60)
        train --config "$IMITATION" --seed "$n" --run-dir "runs/lublin_f1_s$n"
    done
    train --config "$LUBLIN" --seed 0 --run-dir runs/lublin_s0                                # A3 (480a25d)
    # A4: command not recorded: PPO from scratch, --seed 1, stopped at 344k steps; its step budget is not recorded.
    train --config "$LUBLIN" --seed 0 --total-timesteps 1000000 --run-dir runs/lublin_1m_s0  # A5 (7545c60)
    # A6: command not recorded: F1 warm start, PPO at 1e-4 with entropy 0.01, 200k steps, before
    #     lublin_imitation.yaml existed (cloning at PPO's rate until 044c241).
    for n in 0 1; do  # A7, A8: f1/sjf@0.5 with 2 DAgger rounds, then PPO (recorded at 26c4240)
        train --config "$IMITATION" "${DAGGER[@]}" --seed "$n" --run-dir "runs/lublin_dagger_s$n"
    done
}

nobf_outside() {  # rows B1-B7: no backfilling, trained outside the test windows
    local n
    for n in 0 1; do  # B1, B2: F1 warm start (recorded at 7545c60)
        train --config "$IMITATION" --set sampling=outside_test --seed "$n" --run-dir "runs/lublin_out_f1_s$n"
    done
    train --config "$LUBLIN" --set sampling=outside_test --seed 0 --run-dir runs/lublin_out_s0   # B3 (480a25d)
    for n in 0 1 2 3; do  # B4-B7: f1/sjf@0.5 with 2 DAgger rounds, then PPO (recorded at b4f01d0)
        train --config "$IMITATION" --set backfill=false --set sampling=outside_test "${DAGGER[@]}" --seed "$n" \
            --run-dir "runs/lublin_out_dagger_s$n"
    done
}

bf_anywhere() {  # rows C1-C53 whose code is kept: the peer's backfill, trained anywhere
    local bf=(--config "$LUBLIN" --set backfill=true) n
    for n in 0 1 2 3 4 5; do  # C1-C4 (480a25d, 7545c60, b3d1c3a); seeds 4-5: the shortlist table (b65aa65)
        train "${bf[@]}" --seed "$n" --run-dir "runs/lublin_bf_s$n"
    done
    train --config "$IMITATION" --set backfill=true --seed 0 --run-dir runs/lublin_bf_f1_s0   # C5 (7545c60)
    for n in 0 1 2 3; do  # C6, C7 (e715a3b), C44, C45 (0650e3b): 900k steps
        train "${bf[@]}" --total-timesteps 900000 --seed "$n" --run-dir "runs/lublin_bf_900k_s$n"
    done
    train "${bf[@]}" --set ppo.gae_lambda=0.9 --seed 0 --run-dir runs/lublin_bf_gae09_s0    # C8 (e715a3b)
    train "${bf[@]}" --set ppo.gamma=0.99 --seed 0 --run-dir runs/lublin_bf_gamma099_s0     # C9 (e715a3b)
    # C10, C11: command not recorded: the 9th job feature (delay until the job fits) was never committed.
    # C12: command not recorded: the ensemble of C1-C4 (mean of their action probabilities) was never committed.
    for n in 0 1; do
        train "${bf[@]}" --set ppo.hidden=64 --seed "$n" --run-dir "runs/lublin_bf_h64_s$n"        # C13, C14 (7451ecd)
        train "${bf[@]}" --set sequence_jobs=1024 --seed "$n" \
            --run-dir "runs/lublin_bf_seq1024_s$n"                                                # C15, C16 (cc1372b)
        train "${bf[@]}" --n-envs 8 --set ppo.batch_size=512 --total-timesteps 600000 --seed "$n" \
            --run-dir "runs/lublin_bf_8envs_s$n"                                                  # C17, C18 (9d4ca81)
        train "${bf[@]}" --set ppo.ent_coef=0 --seed "$n" --run-dir "runs/lublin_bf_noent_s$n"     # C35, C36 (8c01b15)
    done
    for n in 0 1; do  # C42: learning rate 1e-3 to 1e-4, stopped by hand at 122k steps (8c01b15)
        stopped_run train "${bf[@]}" --set ppo.learning_rate=0.001 --set ppo.learning_rate_end=0.0001 --seed "$n" \
            --run-dir "runs/lublin_bf_lr1e3_s$n"
    done
    # C43: command not recorded: the peer's update scheme (one batch of 8,192 decisions, up to 80 epochs stopped at
    #      approximate KL 0.015, no entropy bonus, constant 3e-4), seeds 0 and 1, stopped after two updates.
    for n in 0 1 2 3; do
        train --config "$IMITATION" --set backfill=true --set pretrain.teacher=f1/sjf@0.5 --seed "$n" \
            --run-dir "runs/lublin_bf_imit_s$n"                                                   # C46-C49 (b65aa65)
        train --config "$IMITATION" --set backfill=true "${DAGGER[@]}" --seed "$n" \
            --run-dir "runs/lublin_bf_dagger_s$n"                                 # C50-C53 (17df9ca, 6de8d37)
    done
}

bf_outside() {  # rows D1-D6: the peer's backfill, trained outside the test windows
    local n
    train --config "$LUBLIN" --set backfill=true --set sampling=outside_test --seed 0 \
        --run-dir runs/lublin_bf_out_s0                                                           # D1 (907c9b6)
    # D2: D1's models decoded with the shortlist sjf@0.3 (17df9ca)
    peer_eval runs/lublin_bf_out_s0_shortlist \
        rls:runs/lublin_bf_out_s0/model.zip+sjf@0.3,rls:runs/lublin_bf_out_s0/best_model.zip+sjf@0.3
    for n in 0 1 2 3; do  # D3-D6: f1/sjf@0.5 with 2 DAgger rounds, then PPO (recorded at b4f01d0)
        train --config "$IMITATION" --set backfill=true --set sampling=outside_test "${DAGGER[@]}" --seed "$n" \
            --run-dir "runs/lublin_bf_out_dagger_s$n"
    done
}

# Rows with code that was not kept: each at its own commit (lublin.yaml's training settings are the same there).

removed_critic() {  # C19-C24: privileged critic input (recorded at 0249f17 and 42c9b89); scored there too
    need_commit 0394169 || return 0
    local n
    for n in 0 1 2 3 4 5; do
        train --config "$LUBLIN" --set backfill=true --set critic_hint=sjf --seed "$n" \
            --run-dir "runs/lublin_bf_critic_s$n"
    done
    # the 42 models: this version scores every checkpoint; take those from 100k steps on plus best and last
    checkpoints runs/lublin_bf_critic_s{0,1,2,3,4,5} --validation 12
}

removed_relsjf() {  # C25-C28: rewards relative to SJF's, per job (recorded at 33cde92); scored in `tried`
    need_commit 770686c || return 0
    local n
    for n in 0 1 2 3; do
        train --config "$LUBLIN" --set backfill=true --set train.reward_baseline=sjf --seed "$n" \
            --run-dir "runs/lublin_bf_relsjf_s$n"
    done
}

removed_endsjf() {  # C29, C30: SJF baseline at the episode's end (recorded at 33cde92)
    need_commit ca62ef0 || return 0
    local n
    for n in 0 1; do
        train --config "$LUBLIN" --set backfill=true --set train.reward_baseline=sjf --seed "$n" \
            --run-dir "runs/lublin_bf_endsjf_s$n"
    done
}

removed_samplers() {  # C31-C34: SJF-weighted and filtered sequence draws (recorded at 8c01b15); scored in `tried`
    need_commit 08ef729 || return 0
    local n
    for n in 0 1; do
        train --config "$LUBLIN" --set backfill=true --set train.sequence_weight=sjf --seed "$n" \
            --run-dir "runs/lublin_bf_sjfweight_s$n"                                                 # C31, C32
        train --config "$LUBLIN" --set backfill=true \
            --set "train.sequence_weight={order: sjf, power: 0, max_quantile: 0.9}" --seed "$n" \
            --run-dir "runs/lublin_bf_filter_s$n"                                                    # C33, C34
    done
}

removed_progress() {  # C37-C41: no progress inputs (recorded at 8c01b15); scored here
    need_commit e13a58c || return 0
    local n
    for n in 0 1 2 3; do  # C37-C40
        train --config "$LUBLIN" --set backfill=true --set progress=false --seed "$n" \
            --run-dir "runs/lublin_bf_noprogress_s$n"
    done
    for n in 4 5; do  # C41: stopped by hand at about 25k steps
        stopped_run train --config "$LUBLIN" --set backfill=true --set progress=false --seed "$n" \
            --run-dir "runs/lublin_bf_noprogress_s$n"
    done
    # the 28 models: this version scores every checkpoint; take those from 100k steps on plus best and last
    checkpoints runs/lublin_bf_noprogress_s{0,1,2,3} --validation 12
}

lookahead() {  # recorded only in the commit history: imitation of a lookahead teacher (81.4)
    need_commit c57779c || return 0
    train --config configs/experiments/lublin_rollout.yaml --run-dir runs/lublin_bf_lookahead_s0
    echo "+ $PYTHON benchmarks/rollout_teacher.py --backfill"
    "$PYTHON" benchmarks/rollout_teacher.py --backfill
}

# ---------------------------------------------------------------------------------------------------------------
# Scoring sections (the models of the training sections above)

shortlist() {  # the shortlist table and the choice of its ratio (recorded at b65aa65)
    local r
    checkpoints runs/lublin_bf_s{0,1,2,3} --validation 12
    checkpoints runs/lublin_bf_s{0,1,2,3} --validation 12 --decode sjf@0.3
    checkpoints runs/lublin_bf_s{4,5} --validation 12
    checkpoints runs/lublin_bf_s{4,5} --validation 12 --decode sjf@0.3
    checkpoints runs/lublin_bf_900k_s{0,1,2,3} --validation 12 --from-step 500000
    checkpoints runs/lublin_bf_900k_s{0,1,2,3} --validation 12 --from-step 500000 --decode sjf@0.3
    for r in 0.9 0.7 0.5; do  # the first look, seeds 0-1
        checkpoints runs/lublin_bf_s{0,1} --validation 12 --decode "sjf@$r"
    done
    checkpoints runs/lublin_bf_s{0,1,2,3} --validation 12 --decode sjf@0.5
    # ratios 0.2 and 0.15 were scored on 14 of the 28 models; which 14 was not recorded
    if have_runs runs/lublin_bf_s4; then  # seed 4's best model decodes to SJF's 73.31
        peer_eval runs/lublin_bf_s4_best_shortlist rls:runs/lublin_bf_s4/best_model.zip+sjf@0.3,rls:sjf+rlsbackfill
    fi
}

orders() {  # the order table (recorded at b65aa65): test, mean wait and utilization, then validation
    local policies more o
    policies=$(for o in sjf f1 saf sjf/saf@0.5 sjf/f1@0.5 f1/sjf@0.5; do
        printf 'rls:%s+rlsbackfill,rls:%s,' "$o" "$o"
    done)
    more=$(for o in sjf/saf@0.3 sjf/saf@0.7 sjf/f1@0.3 sjf/f1@0.7 saf/sjf@0.5 f1/saf@0.5; do
        printf 'rls:%s+rlsbackfill,rls:%s,' "$o" "$o"
    done)
    peer_eval runs/lublin_orders_test "${policies%,}"
    peer_eval runs/lublin_orders_val "${policies%,}" --starts "$VALIDATION_STARTS" --length 512
    peer_eval runs/lublin_orders_more "${more%,}" --starts "$VALIDATION_STARTS" --length 512
}

imitation() {  # the imitation paragraphs (b65aa65, 17df9ca, 6de8d37, b4f01d0, 26c4240)
    checkpoints runs/lublin_bf_imit_s{0,1,2,3} --validation 12
    checkpoints runs/lublin_bf_dagger_s{0,1,2,3} --validation 12
    checkpoints runs/lublin_bf_imit_s{0,1,2,3} --validation 12 --decode sjf@0.3
    checkpoints runs/lublin_bf_out_s0 --validation 12
    checkpoints runs/lublin_bf_out_s0 --validation 12 --decode sjf@0.3
    checkpoints runs/lublin_bf_out_dagger_s{0,1,2,3} --validation 12
    checkpoints runs/lublin_out_dagger_s{0,1,2,3} --validation 12 --target 254.67
    checkpoints runs/lublin_dagger_s{0,1} --validation 12 --target 254.67
}

sampled() {  # decoded by sampling (recorded at e7fe0b9)
    sampling runs/lublin_bf_s{0,1,2,3}/model.zip runs/lublin_bf_dagger_s{0,1,2,3}/model.zip \
        runs/lublin_bf_out_dagger_s{0,1,2,3}/model.zip --draws 3
    sampling runs/lublin_out_dagger_s{0,1,2,3}/model.zip runs/lublin_dagger_s{0,1}/model.zip \
        runs/lublin_f1_s{0,1}/model.zip --draws 3
    # "plain PPO to 342.0": which run without backfilling (A3, A5 or B3) was sampled was not recorded; A3:
    sampling runs/lublin_s0/model.zip --draws 3
}

tried() {  # "with the peer's backfill: where PPO lands" and "what did not move the centre"
    local r
    checkpoints runs/lublin_bf_s{0,1,2,3} runs/lublin_bf_900k_s{0,1} --validation 20      # 66 models (e715a3b)
    checkpoints runs/lublin_bf_relsjf_s{0,1,2,3} --validation 12                            # 28 models (33cde92)
    checkpoints runs/lublin_bf_8envs_s{0,1} --validation 12                                 # 26 models (9d4ca81)
    for r in sjfweight filter noent; do                                                     # 14 models each (8c01b15)
        checkpoints "runs/lublin_bf_${r}_s0" "runs/lublin_bf_${r}_s1" --validation 12
    done
    checkpoints runs/lublin_bf_s{0,1} --validation 12                                       # the two seeds without
    checkpoints runs/lublin_bf_900k_s{0,1} --validation 12 --from-step 500000               # 22 models (0650e3b)
    checkpoints runs/lublin_bf_900k_s{2,3} --validation 12 --from-step 500000
    checkpoints runs/lublin_bf_900k_s{0,1,2,3} --validation 12 --from-step 500000           # 44 models
    # the per-window best of SJF and F1 (recorded at 1ba2061): 58.49
    peer_eval runs/lublin_sjf_f1 rls:sjf+rlsbackfill,rls:f1+rlsbackfill
    "$PYTHON" -c "
import csv, collections
best = collections.defaultdict(lambda: float('inf'))
for row in csv.DictReader(open('runs/lublin_sjf_f1/results.csv')):
    best[row['seed']] = min(best[row['seed']], float(row['mean_bsld']))
print('per-window best of SJF and F1:', round(sum(best.values()) / len(best), 2))"
    # not recorded: the count of the 70 models' wins and swings per window
}

# ---------------------------------------------------------------------------------------------------------------

SECTIONS=(nobf_anywhere nobf_outside bf_anywhere bf_outside shortlist orders imitation sampled tried)
OTHERS=(removed_critic removed_relsjf removed_endsjf removed_samplers removed_progress lookahead)  # own commits
# shellcheck source=sections.sh
source "$SCRIPTS/sections.sh"
run_sections "$@"
