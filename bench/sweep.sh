#!/usr/bin/env bash
# The shape sweep in one same-run comparison: for every spec of the specs
# file, forge's `examples/sweep.rs` and PyTorch's `bench/sweep_torch.py`
# back to back (their order swapped from one spec to the next and from one
# pass to the next), at 1 and 2 threads, train and infer; the machine's FMA
# peak measured before the first spec and after each (`bench --json --models
# gemm --rounds 0`; the table divides by the best reading),
# so that `compare_table.py` adds each row's share of the peak and its
# `floor / PyTorch` (`examples/bench_sections/sweep_flops.rs`).
#
#   bash bench/sweep.sh [--passes N] [--specs FILE] [--out DIR]
#
# Defaults: 2 passes over `bench/sweep_specs.txt` (the shapes the project is
# also checked on: deeper and wider GPTs, odd MLPs, VGG-style and small conv
# nets, Transformer encoders, and the plan's models at other batches), each
# row one warm-up step and 2 rounds x 2 timed steps a pass; the folder is
# `bench/results/sweep/<UTC time>_<machine>_<commit>/`. It holds the specs,
# the JSON lines of both sides and of the peak, the load after each spec and
# `table.md`. Run from the repository root on a machine with nothing else
# running; PyTorch must be importable (`pip install torch torchvision`).
set -euo pipefail

passes=2
specs=bench/sweep_specs.txt
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --passes) passes=$2; shift 2 ;;
        --specs) specs=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        *) echo "usage: bash bench/sweep.sh [--passes N] [--specs FILE] [--out DIR]" >&2; exit 2 ;;
    esac
done
python3 -c 'import torch, torchvision' 2>/dev/null || {
    echo "sweep.sh: python3 cannot import torch and torchvision (pip install torch torchvision)" >&2
    exit 1
}
cargo build --release --example sweep --example bench
commit=$(git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
if [ -z "$out" ]; then
    out="bench/results/sweep/$(date -u +%Y-%m-%dT%H%MZ)_$(python3 bench/run_meta.py machine)_$commit"
fi
mkdir -p "$out"
cp "$specs" "$out/specs.txt"

peak() {
    target/release/examples/bench --json --models gemm --threads 1,2 --rounds 0 --warmup 0 \
        --round "$1" | grep '"bench": "peak"' | sed "s/^{/{\"when\": \"$2\", /" >> "$out/peak.jsonl"
}

echo "start $(date -u +%FT%TZ) $(cat /proc/loadavg) commit $commit passes $passes" > "$out/load.txt"
peak 0 before
for ((p = 0; p < passes; p++)); do
    i=0
    for s in $(grep -v '^#' "$specs"); do
        args=("$s" --round "$p" --threads 1,2 --modes train,infer --warmup 1 --rounds 2 --block 2)
        if [ $(((i + p) % 2)) = 0 ]; then
            target/release/examples/sweep "${args[@]}" >> "$out/forge.jsonl" 2>/dev/null
            python3 bench/sweep_torch.py "${args[@]}" >> "$out/torch.jsonl" 2>/dev/null
        else
            python3 bench/sweep_torch.py "${args[@]}" >> "$out/torch.jsonl" 2>/dev/null
            target/release/examples/sweep "${args[@]}" >> "$out/forge.jsonl" 2>/dev/null
        fi
        echo "pass $p $s $(date -u +%FT%TZ) $(cat /proc/loadavg)" >> "$out/load.txt"
        # the peak again after every spec: this host's vCPUs run in faster
        # and slower phases, and the table divides by the best reading
        peak "$p" "after $s"
        i=$((i + 1))
    done
done
python3 bench/compare_table.py "$out/torch.jsonl" "$out/forge.jsonl" "$out/peak.jsonl" > "$out/table.md"
echo "sweep.sh: wrote $out/table.md"
