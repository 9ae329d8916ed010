# PyTorch's per-phase rows for ResNet-18 (forge's own script, not part of
# ../shared/bench): `fwd` (forward + loss, autograd recording) and `fwdbwd`
# (that + backward), batch 16, timed by torch_bench.py's own `run` (same
# model, data, seeds, warm-up and interleaving as its `train` rows), as JSON
# lines in torch_bench.py's schema. bench/compare.sh runs it with --phases;
# forge's `bench --json` always has the matching rows. The optimizer phase
# is train - fwdbwd.
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--round", type=int, default=0)
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    for mode in ("fwdbwd", "fwd"):
        torch_bench.run("resnet18", mode, 16, threads, a.warmup, a.rounds, a.block, a.round)


if __name__ == "__main__":
    main()
