#!/usr/bin/env python3
"""Checks the FLOPs forge's sweep prints (`gflop`, examples/bench_sections/sweep_flops.rs)
against PyTorch's own count of the same models (torch.utils.flop_counter.FlopCounterMode over
bench/sweep_torch.py's models: one forward under no_grad, one forward and backward).

    cargo build --release --example sweep
    python3 bench/sweep_flops_check.py [SPEC ...]     # default: bench/sweep_specs.txt

Prints one line per spec and mode, forge's GFLOP, PyTorch's and their ratio. Expected: 1.000
for the MLPs, conv nets, ResNet-18 and LeNet; about 0.95-0.975 for the GPTs (forge counts the
causal attention's (query, key) pairs, PyTorch's counter the full T x T products); 0.99-1.0
for an encoder's training. PyTorch's counter does not see the fused LSTM nor the encoder's
inference fast path (its figure is then far below forge's: `-` here).
"""
import json
import subprocess
import sys

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, "bench")
import sweep_torch  # noqa: E402


def torch_gflop(spec):
    kind, keys, _ = sweep_torch.parse(spec)
    m, x, _, loss_fn = sweep_torch.make(kind, keys, int(keys.get("B", 16)))
    m.eval()
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        m(x)
    infer = fc.get_total_flops() / 1e9
    m.train()
    with FlopCounterMode(display=False) as fc:
        loss_fn(m(x)).backward()
    return {"infer": infer, "train": fc.get_total_flops() / 1e9}


def main():
    specs = sys.argv[1:] or [s.strip() for s in open("bench/sweep_specs.txt")
                             if s.strip() and not s.startswith("#")]
    out = subprocess.run(["target/release/examples/sweep", *specs, "--threads", "1", "--rounds", "0",
                          "--warmup", "0", "--modes", "train,infer"],
                         check=True, capture_output=True, text=True).stdout
    forge = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    # sweep prints the specs in order, each spec's modes in the order asked
    for spec, (train, infer) in zip(specs, zip(forge[0::2], forge[1::2])):
        theirs = torch_gflop(spec)
        for row in (train, infer):
            f, t = row["gflop"], theirs[row["mode"]]
            ratio = f"{f / t:.3f}" if t and 0.5 < f / t < 2 else "-"
            print(f"{spec:50} {row['mode']:5} forge {f:9.4f}  PyTorch {t:9.4f}  {ratio}")


if __name__ == "__main__":
    main()
