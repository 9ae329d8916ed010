#!/usr/bin/env bash
# Same-run comparison of forge and PyTorch (CPU eager, float32).
#
#   bash bench/compare.sh                          # the full plan, 1 and 2 threads
#   bash bench/compare.sh --models mlp,gpt --threads 1,2
#   bash bench/compare.sh --quick                  # 2 rounds of short blocks (a smoke run)
#   bash bench/compare.sh --no-gemm                # models only (skip the sgemm table)
#   bash bench/compare.sh --phases                 # + PyTorch's resnet18 fwd/fwdbwd rows
#                                                  #   (bench/torch_phases.py)
#   bash bench/compare.sh --out DIR                # write the run there instead
#   bash bench/compare.sh --hub [--repeat 3]       # the hub rows instead: gpt2s
#                                                  #   generate(_int8) 1, bert_base
#                                                  #   infer(_int8, _bf16) 8
#                                                  #   against transformers
#                                                  #   (bench/infer_bench.py), 3
#                                                  #   rounds each; folder ..._hub
#   bash bench/compare.sh --ort [--repeat 2]       # the inference rows against ONNX
#                                                  #   Runtime and PyTorch: ort_bench.py
#                                                  #   ($ORT_BENCH, default
#                                                  #   ../shared/bench/ort_bench.py; mlp
#                                                  #   1/128, resnet18 1/32, lstm 64,
#                                                  #   bert_base 8) and torch_bench.py's
#                                                  #   gpt infer 1, interleaved with
#                                                  #   `bench --json --modes infer`;
#                                                  #   folder ..._ort (needs onnxruntime
#                                                  #   and onnx locally, never in CI)
#
# Builds forge's bench (release), then runs PyTorch's script
# (bench/torch_bench.py, or $TORCH_BENCH) and `bench --json` alternately,
# twice each (--repeat N rounds; in the plan one model at a time, the two
# sides back to back, their order swapped every round), and prints a markdown table of medians and ratios
# (forge / PyTorch) per (model, mode, batch, threads). Before the models,
# the same for sgemm (bench/gemm_torch.py and `bench --json --models gemm`):
# GFLOP/s at the shapes of the gemm table, beside the FMA peak measured in
# this run on this machine. Needs python3 with torch (and torchvision for
# resnet18); not part of CI.
#
# Every run is kept as data in its own folder,
# bench/results/<UTC date-time>_<machine>_<commit>/ (or --out DIR):
#   meta.json          CPU, ISA flags, cores, the FMA peak measured in the
#                      run, load and placement readings, versions, command
#                      (bench/run_meta.py writes it, also when a run stops
#                      early: then "complete" is false)
#   forge.jsonl        forge's JSON lines (`bench --json`), both rounds
#   torch.jsonl        PyTorch's (torch_bench.py), both rounds
#   gemm_forge.jsonl   forge's sgemm and peak lines
#   gemm_torch.jsonl   PyTorch's sgemm lines
#   peak.jsonl         the FMA peak measured before the run, after each model
#                      of the plan, and after the run
#   load.jsonl         load average and thread placement before and after
#                      every block
#   table.md           the printed tables (bench/compare_table.py)
# `python3 bench/report.py` then regenerates bench/results/CURRENT.md (the
# latest run per machine) and the README's table. The machine's name is
# derived from /proc/cpuinfo (bench/run_meta.py machine); set
# $BENCH_MACHINE to name it yourself.
set -euo pipefail
cd "$(dirname "$0")/.."

command_line="bash bench/compare.sh${*:+ $*}"
models="tiny,mlp,lenet,gpt,resnet18,lstm"
gemm=1
phases=0
quick=0
threads="1,2"
out=""
extra=()
hub=0
ort=0
repeat=2
while [ $# -gt 0 ]; do
    case "$1" in
        --models) models="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --quick) extra=(--rounds 2 --block 3 --warmup 2); quick=1; shift ;;
        --no-gemm) gemm=0; shift ;;
        --phases) phases=1; shift ;;
        --out) out="$2"; shift 2 ;;
        --hub) hub=1; gemm=0; models="gpt2s,bert_base"; shift ;;
        --ort) ort=1; gemm=0; models="mlp,resnet18,lstm,gpt,bert_base"; shift ;;
        --repeat) repeat="$2"; shift 2 ;;
        *) echo "compare.sh: unknown argument $1" >&2
           echo "usage: bash bench/compare.sh [--models M,..] [--threads T,..] [--quick] [--no-gemm] [--phases] [--out DIR] [--hub] [--ort] [--repeat N]" >&2
           exit 2 ;;
    esac
done

torch_bench="${TORCH_BENCH:-bench/torch_bench.py}"
suite=models
forge_modes=()
if [ "$hub" = 1 ]; then
    # infer_bench.py's hub rows (f32, int8 and bf16); its own schedule
    # (3 rounds of 2 timed calls per thread count) unless --quick
    torch_bench="bench/infer_bench.py"
    suite=hub
    hub_modes=generate,generate_int8,infer,infer_int8,infer_bf16
    extra=(--modes "$hub_modes")
    if [ "$quick" = 1 ]; then
        extra+=(--rounds 1 --block 1)
        forge_modes=(--modes "$hub_modes" --rounds 1 --block 5)
    else
        forge_modes=(--modes "$hub_modes" --rounds 3)
    fi
    python3 -c 'import transformers' 2>/dev/null || { echo "compare.sh: --hub needs transformers (pip install transformers)" >&2; exit 1; }
fi

ort_bench="${ORT_BENCH:-../shared/bench/ort_bench.py}"
if [ "$ort" = 1 ]; then
    suite=ort
    [ -f "$ort_bench" ] || { echo "compare.sh: --ort needs $ort_bench (set ORT_BENCH)" >&2; exit 1; }
    python3 -c 'import onnxruntime, onnx' 2>/dev/null || { echo "compare.sh: --ort needs onnxruntime and onnx (pip install onnxruntime onnx)" >&2; exit 1; }
    extra=(--modes infer)
fi

python3 -c 'import torch' 2>/dev/null || { echo "compare.sh: python3 cannot import torch (pip install torch torchvision)" >&2; exit 1; }
case ",$models," in
    *,resnet18,*) python3 -W ignore -c 'import torchvision' 2>/dev/null || {
        echo "compare.sh: resnet18 needs torchvision (pip install torchvision; or --models without resnet18)" >&2; exit 1; } ;;
esac

# PyTorch's OpenMP threads spin while they wait for work; when other
# processes hold the cores that spinning makes a 2-thread GPT step ~100x
# slower. On a loaded machine the runs use OMP_WAIT_POLICY=PASSIVE
# (threads sleep while waiting); on a quiet one PyTorch's default. Set
# OMP_WAIT_POLICY yourself to choose; OMP_WAIT_POLICY=default runs PyTorch
# with the variable unset whatever the load (the 1-minute load average also
# counts processes that have just stopped or been paused, so it can call a
# quiet machine busy).
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

started=$(date -u '+%Y-%m-%dT%H:%M:%SZ')
machine="${BENCH_MACHINE:-$(python3 bench/run_meta.py machine)}"
commit=$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
if [ -z "$out" ]; then
    out="bench/results/$(date -u -d "$started" '+%Y-%m-%dT%H%MZ')_${machine}_${commit}"
    [ "$hub" = 1 ] && out="${out}_hub"
    [ "$ort" = 1 ] && out="${out}_ort"
fi
if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
    echo "compare.sh: $out exists and is not empty" >&2
    exit 1
fi
mkdir -p "$out"
echo "writing the run to $out" >&2

# meta.json is written however the run ends ("complete": false when it
# stopped early), so the blocks that did finish stay usable.
write_meta() {
    local status=$?
    python3 bench/run_meta.py write "$out" --status "$status" --started "$started" \
        --command "$command_line" --omp "$omp_note" --machine "$machine" --quick "$quick" \
        --models "$models" --threads "$threads" --bench-bin "$bench_bin" --suite "$suite" || true
}
trap write_meta EXIT
# A signal ends the run through `exit`, so the EXIT trap writes meta.json
# (bash handles it once the block running in the foreground has finished).
trap 'exit 130' INT
trap 'exit 143' TERM

# The FMA peak of this machine, now: `bench --json --models gemm` prints
# the peak lines first; zero rounds and no warm-up skip the products.
peak() {
    "$bench_bin" --json --models gemm --threads "$threads" --rounds 0 --warmup 0 --round "$1" \
        | grep '"bench": "peak"' | sed "s/^{/{\"when\": \"$2\", /" >> "$out/peak.jsonl"
}

# The load, and how far apart the host has put the two threads (a
# cache-line round trip: tens of ns on a shared last-level cache, hundreds
# across core complexes; `bench --only placement`). The uptime is read
# first, so the reading's time is when the probe started. The probe takes
# tens of ms on a quiet machine; when other processes hold the cores its
# two spinning threads rarely run at once, it can take a minute and its
# figure means nothing, so it is stopped after 10 s (no figure recorded).
load() {
    local at up place
    at=$(date -u '+%Y-%m-%dT%H:%M:%SZ')
    up=$(uptime)
    place=$(timeout 10 "$bench_bin" --only placement --quick | sed -n 's/^placement: //p' || true)
    place="${place:-placement probe stopped after 10 s (the cores were busy)}"
    echo "$1: $up; $place" >&2
    python3 bench/run_meta.py load-line "$1" "$at" "$up" "$place" >> "$out/load.jsonl"
}

# run LABEL FILE COMMAND...: one block, its output appended to FILE, with
# the load read before and after it. Nothing runs between one block's end
# and the next one's start, so that reading is one probe ("after A, before
# B"), not two.
pending=""
run() {
    local label="$1" file="$2"
    shift 2
    load "${pending:+after $pending, }before $label"
    "$@" >> "$out/$file"
    pending="$label"
}

peak 0 before
for round in $(seq 0 $((repeat - 1))); do
    if [ "$gemm" = 1 ]; then
        run "torch gemm round $round" gemm_torch.jsonl \
            python3 bench/gemm_torch.py --threads "$threads" --round "$round" "${extra[@]}"
        run "forge gemm round $round" gemm_forge.jsonl \
            "$bench_bin" --json --models gemm --threads "$threads" --round "$round" "${extra[@]}"
    fi
    if [ "$ort" = 1 ]; then
        # ort_bench.py prints ONNX Runtime's and PyTorch's lines (framework
        # "ort" / "torch"); torch_bench.py adds PyTorch's gpt infer 1
        run "ort round $round" ort.jsonl python3 "$ort_bench" --rounds 1
        run "torch gpt round $round" torch.jsonl \
            python3 "$torch_bench" --models gpt --threads "$threads" --round "$round"
    elif [ "$hub" = 1 ]; then
    run "torch round $round" torch.jsonl \
        python3 "$torch_bench" --models "$models" --threads "$threads" --round "$round" "${extra[@]}"
    else
        # The plan: one model at a time, PyTorch's block and forge's back to
        # back (PyTorch first in even rounds, forge first in odd ones), so
        # the two sides of a row run within a minute of each other. This
        # host runs whole minutes in a phase about 2x slower for either
        # side; with every model of one side in a block of its own (4-5
        # minutes a round), a row's ratio depended on which side that phase
        # fell on.
        for m in ${models//,/ }; do
            torch_block=(run "torch $m round $round" torch.jsonl \
                python3 "$torch_bench" --models "$m" --threads "$threads" --round "$round" "${extra[@]}")
            forge_block=(run "forge $m round $round" forge.jsonl \
                "$bench_bin" --json --models "$m" --threads "$threads" --round "$round" "${extra[@]}")
            if [ $((round % 2)) = 0 ]; then
                "${torch_block[@]}"; "${forge_block[@]}"
            else
                "${forge_block[@]}"; "${torch_block[@]}"
            fi
            # The peak again after each model (about a second): this host's
            # vCPUs run in faster and slower phases (one thread read 175
            # GFLOP/s in the run of 2026-12-07 05:54 and 195-246 in six
            # readings on a machine of the same kind two hours later), and
            # the floors divide by the best reading.
            peak "$round" "after $m round $round"
        done
    fi
    case "$phases,$models," in
        1,*resnet18,*) run "torch phases round $round" torch.jsonl \
            python3 -W ignore bench/torch_phases.py --threads "$threads" --round "$round" "${extra[@]}" ;;
    esac
    if [ "$hub" = 1 ]; then
        run "forge round $round" forge.jsonl \
            "$bench_bin" --json --models "$models" --threads "$threads" --round "$round" "${forge_modes[@]}"
    elif [ "$ort" = 1 ]; then
        run "forge round $round" forge.jsonl \
            "$bench_bin" --json --models "$models" --threads "$threads" --round "$round" "${extra[@]}"
    fi
done
load "after $pending"
peak 1 after

{
    cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
    echo "forge vs PyTorch, $started, ${cpu_model:-unknown CPU}, $(nproc) hardware threads, $(python3 -c 'import torch; print("torch", torch.__version__)'), PyTorch run with $omp_note"
    echo
    tables=("$out"/torch.jsonl "$out"/forge.jsonl "$out"/peak.jsonl)
    [ "$ort" = 1 ] && tables+=("$out"/ort.jsonl)
    if [ "$gemm" = 1 ]; then
        python3 bench/compare_table.py "$out"/gemm_*.jsonl "$out"/peak.jsonl
    fi
    python3 bench/compare_table.py "${tables[@]}"
} > "$out/table.md"
echo
cat "$out/table.md"
echo "Load (uptime) and thread placement around the runs: $out/load.jsonl"
echo "The run's data: $out (python3 bench/report.py regenerates bench/results/CURRENT.md)"
