#!/usr/bin/env python3
"""Markdown table of forge vs PyTorch step times from JSON-lines files.

Reads every file named on the command line (the output of
`cargo run --release --example bench -- --json` and of `torch_bench.py`,
one JSON object per line; other lines are ignored) and prints, per
(model, mode, batch, threads), the median over all timed steps of all
runs of each framework, each run's own median, and the ratio
forge / PyTorch (below 1: forge is faster). Standard library only.
"""
import json
import statistics
import sys
from collections import defaultdict


def load(paths):
    # (framework, model, mode, batch, threads) -> list of (round, ms list, faults)
    rows = defaultdict(list)
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if r.get("bench") != "train" or not r.get("ms"):
                    continue
                key = (r["framework"], r["model"], r["mode"], r["batch"], r["threads"])
                rows[key].append((r.get("round", 0), r["ms"], r.get("faults_per_step")))
    return rows


def fmt_ms(v):
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 1 else (f"{v:.2f}" if v < 100 else f"{v:.1f}")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: compare_table.py FILE.jsonl [FILE.jsonl ...]")
    rows = load(sys.argv[1:])
    model_order = ["tiny", "mlp", "lenet", "gpt", "gpt_naive", "resnet18", "lstm"]
    mode_order = ["train", "fwdbwd", "fwd", "infer"]
    keys = sorted({k[1:] for k in rows},
                  key=lambda k: (model_order.index(k[0]) if k[0] in model_order else 99,
                                 mode_order.index(k[1]) if k[1] in mode_order else 99, k[2], k[3]))

    def stats(fw, k):
        runs = sorted(rows.get((fw,) + k, []), key=lambda r: r[0])
        if not runs:
            return None, "-", None
        pooled = [v for _, ms, _ in runs for v in ms]
        per_run = " / ".join(fmt_ms(statistics.median(ms)) for _, ms, _ in runs)
        faults = [f for _, _, f in runs if f is not None]
        return statistics.median(pooled), per_run, (max(faults) if faults else None)

    print("| model | mode | batch | threads | PyTorch ms | forge ms | forge / PyTorch "
          "| PyTorch runs | forge runs | forge faults/step |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in keys:
        t_med, t_runs, _ = stats("torch", k)
        f_med, f_runs, faults = stats("forge", k)
        ratio = f"**{f_med / t_med:.2f}**" if t_med and f_med else "-"
        fl = "-" if faults is None else f"{faults:.1f}"
        print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {fmt_ms(t_med)} | {fmt_ms(f_med)} | {ratio} "
              f"| {t_runs} | {f_runs} | {fl} |")
    print()
    print("Medians over every timed step of every run (each run's own median in the runs columns); "
          "faults/step: the larger of the runs' minor page faults per timed step.")


if __name__ == "__main__":
    main()
