#!/usr/bin/env bash
# Same-run comparison of forge and PyTorch (CPU eager, float32).
#
#   bash bench/compare.sh                          # the full plan, 1 and 2 threads
#   bash bench/compare.sh --models mlp,gpt --threads 1,2
#   bash bench/compare.sh --quick                  # 2 rounds of short blocks (a smoke run)
#   bash bench/compare.sh --no-gemm                # models only (skip the sgemm table)
#   bash bench/compare.sh --phases                 # + PyTorch's resnet18 fwd/fwdbwd rows
#                                                  #   (bench/torch_phases.py)
#
# Builds forge's bench (release), then runs PyTorch's script
# (bench/torch_bench.py, or $TORCH_BENCH) and `bench --json` alternately,
# twice each, and prints a markdown table of medians and ratios
# (forge / PyTorch) per (model, mode, batch, threads), with `uptime` before
# and after every run. Before the models, the same for sgemm
# (bench/gemm_torch.py and `bench --json --models gemm`): GFLOP/s at the
# shapes of the README's gemm table, beside the FMA peak measured in the run. Needs python3 with torch (and torchvision for
# resnet18); not part of CI. Raw JSON lines are kept in $OUT (default
# target/compare/).
set -euo pipefail
cd "$(dirname "$0")/.."

models="tiny,mlp,lenet,gpt,resnet18,lstm"
gemm=1
phases=0
threads="1,2"
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --models) models="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --quick) extra=(--rounds 2 --block 3 --warmup 2); shift ;;
        --no-gemm) gemm=0; shift ;;
        --phases) phases=1; shift ;;
        *) echo "compare.sh: unknown argument $1" >&2
           echo "usage: bash bench/compare.sh [--models M,..] [--threads T,..] [--quick] [--no-gemm] [--phases]" >&2
           exit 2 ;;
    esac
done

torch_bench="${TORCH_BENCH:-bench/torch_bench.py}"
out="${OUT:-target/compare}"
mkdir -p "$out"
rm -f "$out"/*.jsonl "$out"/load.txt

python3 -c 'import torch' 2>/dev/null || { echo "compare.sh: python3 cannot import torch (pip install torch torchvision)" >&2; exit 1; }
case ",$models," in
    *,resnet18,*) python3 -W ignore -c 'import torchvision' 2>/dev/null || {
        echo "compare.sh: resnet18 needs torchvision (pip install torchvision; or --models without resnet18)" >&2; exit 1; } ;;
esac

# PyTorch's OpenMP threads spin while they wait for work; when other
# processes hold the cores that spinning makes a 2-thread GPT step ~100x
# slower (9 s instead of 50 ms, measured at load 18). On a loaded machine
# the runs use OMP_WAIT_POLICY=PASSIVE (threads sleep while waiting); on a
# quiet one PyTorch's default. Set OMP_WAIT_POLICY yourself to choose;
# OMP_WAIT_POLICY=default runs PyTorch with the variable unset whatever
# the load (the 1-minute load average also counts processes that have just
# stopped or been paused, so it can call a quiet machine busy).
if [ "${OMP_WAIT_POLICY:-}" = default ]; then
    unset OMP_WAIT_POLICY
elif [ -z "${OMP_WAIT_POLICY:-}" ]; then
    load1=$(cut -d' ' -f1 /proc/loadavg)
    if python3 -c "import sys; sys.exit(0 if float('$load1') > $(nproc) else 1)"; then
        export OMP_WAIT_POLICY=PASSIVE
    fi
fi
omp_note="OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-default}"

echo "building forge's bench (release)..." >&2
cargo build --release --example bench >&2
bench_bin="${CARGO_TARGET_DIR:-target}/release/examples/bench"

# The load, and how far apart the host has put the two threads (a
# cache-line round trip: tens of ns on a shared last-level cache, hundreds
# across core complexes; `bench --only placement`, README "Spans").
load() {
    echo "$1: $(uptime); $("$bench_bin" --only placement --quick | sed -n 's/^placement: //p')" | tee -a "$out/load.txt" >&2
}

for round in 0 1; do
    if [ "$gemm" = 1 ]; then
        load "before torch gemm round $round"
        python3 bench/gemm_torch.py --threads "$threads" --round "$round" "${extra[@]}" > "$out/gemm_torch_$round.jsonl"
        load "before forge gemm round $round"
        "$bench_bin" --json --models gemm --threads "$threads" --round "$round" "${extra[@]}" \
            > "$out/gemm_forge_$round.jsonl"
    fi
    load "before torch round $round"
    python3 "$torch_bench" --models "$models" --threads "$threads" --round "$round" "${extra[@]}" \
        > "$out/torch_$round.jsonl"
    case "$phases,$models," in
        1,*resnet18,*) python3 -W ignore bench/torch_phases.py --threads "$threads" --round "$round" \
            "${extra[@]}" >> "$out/torch_$round.jsonl" ;;
    esac
    load "before forge round $round"
    "$bench_bin" --json --models "$models" --threads "$threads" --round "$round" "${extra[@]}" \
        > "$out/forge_$round.jsonl"
done
load "after the last run"

echo
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
echo "forge vs PyTorch, $(date -u '+%Y-%m-%d %H:%M UTC'), ${cpu_model:-unknown CPU}, $(nproc) hardware threads, $(python3 -c 'import torch; print("torch", torch.__version__)'), PyTorch run with $omp_note"
echo
if [ "$gemm" = 1 ]; then
    python3 bench/compare_table.py "$out"/gemm_*.jsonl
fi
python3 bench/compare_table.py "$out"/torch_*.jsonl "$out"/forge_*.jsonl
echo
echo "Load (uptime) and thread placement around the runs:"
sed 's/^/    /' "$out/load.txt"
