#!/usr/bin/env bash
# Same-run comparison of forge and PyTorch (CPU eager, float32).
#
#   bash bench/compare.sh                          # the full plan, 1 and 2 threads
#   bash bench/compare.sh --models mlp,gpt --threads 1,2
#   bash bench/compare.sh --quick                  # 2 rounds of short blocks (a smoke run)
#
# Builds forge's bench (release), then runs PyTorch's script
# (bench/torch_bench.py, or $TORCH_BENCH) and `bench --json` alternately,
# twice each, and prints a markdown table of medians and ratios
# (forge / PyTorch) per (model, mode, batch, threads), with `uptime` before
# and after every run. Needs python3 with torch (and torchvision for
# resnet18); not part of CI. Raw JSON lines are kept in $OUT (default
# target/compare/).
set -euo pipefail
cd "$(dirname "$0")/.."

models="tiny,mlp,lenet,gpt,resnet18,lstm"
threads="1,2"
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --models) models="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --quick) extra=(--rounds 2 --block 3 --warmup 2); shift ;;
        *) echo "compare.sh: unknown argument $1" >&2
           echo "usage: bash bench/compare.sh [--models M,..] [--threads T,..] [--quick]" >&2
           exit 2 ;;
    esac
done

torch_bench="${TORCH_BENCH:-bench/torch_bench.py}"
out="${OUT:-target/compare}"
mkdir -p "$out"
rm -f "$out"/*.jsonl "$out"/load.txt

python3 -c 'import torch' 2>/dev/null || { echo "compare.sh: python3 cannot import torch (pip install torch torchvision)" >&2; exit 1; }

echo "building forge's bench (release)..." >&2
cargo build --release --example bench >&2
bench_bin="target/release/examples/bench"

load() { echo "$1: $(uptime)" | tee -a "$out/load.txt" >&2; }

for round in 0 1; do
    load "before torch round $round"
    python3 "$torch_bench" --models "$models" --threads "$threads" --round "$round" "${extra[@]}" \
        > "$out/torch_$round.jsonl"
    load "before forge round $round"
    "$bench_bin" --json --models "$models" --threads "$threads" --round "$round" "${extra[@]}" \
        > "$out/forge_$round.jsonl"
done
load "after the last run"

echo
echo "forge vs PyTorch, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) hardware threads, $(python3 -c 'import torch; print("torch", torch.__version__)')"
echo
python3 bench/compare_table.py "$out"/torch_*.jsonl "$out"/forge_*.jsonl
echo
echo "Load (uptime) around the runs:"
sed 's/^/    /' "$out/load.txt"
