"""torch.mm / F.linear GFLOP/s for the shapes of forge's gemm table, printed as
`bench --json --models gemm` prints forge's (one JSON line per shape and thread
count, every timed sample in ms per call), so bench/compare.sh can put them
side by side from the same session."""
import argparse
import json
import time

import torch
import torch.nn.functional as F

# (m, k, n, b_transposed): as GEMM_SHAPES in examples/bench_sections/json.rs
SHAPES = [(64, 64, 64, False), (256, 256, 256, False), (1024, 1024, 1024, False),
          (128, 784, 512, True), (128, 84, 10, True), (128, 512, 10, True), (1, 784, 512, True)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--block", type=int, default=10)
    ap.add_argument("--round", type=int, default=0)
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    g = torch.Generator().manual_seed(0)
    for m, k, n, tb in SHAPES:
        x = torch.randn(m, k, generator=g)
        w = torch.randn(n, k, generator=g) if tb else torch.randn(k, n, generator=g)
        step = (lambda: F.linear(x, w)) if tb else (lambda: torch.mm(x, w))
        reps = min(1000, max(1, int(2e6 / (2.0 * m * k * n / 100.0))))
        times = {t: [] for t in threads}
        with torch.inference_mode():
            for t in threads:
                torch.set_num_threads(t)
                for _ in range(a.warmup * reps):
                    step()
            for _ in range(a.rounds):
                for t in threads:
                    torch.set_num_threads(t)
                    step()
                    for _ in range(a.block):
                        t0 = time.perf_counter()
                        for _ in range(reps):
                            step()
                        times[t].append((time.perf_counter() - t0) * 1e3 / reps)
        for t in threads:
            print(json.dumps(dict(bench="gemm", framework="torch", m=m, k=k, n=n, b_transposed=tb, threads=t,
                                  round=a.round, ms=[float(f"{v:.6e}") for v in times[t]])), flush=True)


if __name__ == "__main__":
    main()
