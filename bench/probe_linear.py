"""GFLOP/s of torch.nn.functional.linear under torch.inference_mode() at the
shapes of examples/probe_linear.rs (the same table, the same rounds: the
median of 7 rounds of about 30 ms each).

    python3 bench/probe_linear.py            # 1 and 2 threads
    python3 bench/probe_linear.py 1 gpt128   # 1 thread, names containing "gpt128"
"""
import sys
import time

import torch
import torch.nn.functional as F

SHAPES = [
    ("mlp128_fc1", 128, 784, 512, True),
    ("mlp128_fc2", 128, 512, 256, True),
    ("mlp128_fc3", 128, 256, 10, True),
    ("lstm64_in", 2048, 128, 512, True),
    ("lstm64_hid", 64, 128, 512, False),
    ("gpt128_qkv", 4096, 128, 384, True),
    ("gpt128_proj", 4096, 128, 128, True),
    ("gpt128_fc", 4096, 128, 512, True),
    ("gpt128_fc2", 4096, 512, 128, True),
    ("gpt128_head", 4096, 128, 256, False),
    ("gpt192_qkv", 2048, 192, 576, True),
    ("gpt192_proj", 2048, 192, 192, True),
    ("gpt192_fc", 2048, 192, 768, True),
    ("gpt192_fc2", 2048, 768, 192, True),
    ("gpt256_qkv", 1024, 256, 768, True),
    ("gpt256_proj", 1024, 256, 256, True),
    ("gpt256_fc", 1024, 256, 1024, True),
    ("gpt256_fc2", 1024, 1024, 256, True),
    ("bert_qkv", 1024, 768, 768, True),
    ("bert_fc1", 1024, 768, 3072, True),
    ("bert_fc2", 1024, 3072, 768, True),
]


def main():
    threads = [int(sys.argv[1])] if len(sys.argv) > 1 else [1, 2]
    filt = sys.argv[2] if len(sys.argv) > 2 else ""
    torch.manual_seed(41)
    print(f"{'shape':<14} {'m':>5} {'k':>5} {'n':>5} {'T':>3} {'us':>9} {'GFLOP/s':>9}")
    for name, m, k, n, has_bias in SHAPES:
        if filt not in name:
            continue
        x = torch.randn(m, k)
        w = torch.randn(n, k) * 0.05
        b = torch.randn(n) * 0.1 if has_bias else None
        for t in threads:
            torch.set_num_threads(t)
            with torch.inference_mode():
                t0 = time.perf_counter()
                F.linear(x, w, b)
                one = time.perf_counter() - t0
                reps = min(max(int(0.03 / max(one, 1e-7)), 1), 100_000)
                rounds = []
                for _ in range(7):
                    t0 = time.perf_counter()
                    for _ in range(reps):
                        F.linear(x, w, b)
                    rounds.append((time.perf_counter() - t0) / reps)
                rounds.sort()
                us = rounds[3] * 1e6
            gf = 2.0 * m * k * n / us / 1e3
            print(f"{name:<14} {m:>5} {k:>5} {n:>5} {t:>3} {us:>9.1f} {gf:>9.1f}")


if __name__ == "__main__":
    main()
