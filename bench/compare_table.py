#!/usr/bin/env python3
"""Markdown table of forge vs PyTorch step times from JSON-lines files.

Reads every file named on the command line (the output of
`cargo run --release --example bench -- --json` and of `torch_bench.py`,
one JSON object per line; other lines are ignored) and prints, per
(model, mode, batch, threads), the median over all timed steps of all
runs of each framework, each run's own median, and the ratio
forge / PyTorch (below 1: forge is faster). Where forge's rows carry
`gflop` (the FLOPs of one step: `bench --json` and the sweep print it) and
the files hold the run's FMA peak lines (`bench --json --models gemm`), two
more columns: forge's share of that peak, and `floor / PyTorch`, the time
those FLOPs take at the peak divided by PyTorch's time (no implementation
of the same products reads below it on that machine). Standard library
only.
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
                # torch_bench.py's rows say "train", infer_bench.py's "infer"
                if r.get("bench") not in ("train", "infer") or not r.get("ms"):
                    continue
                key = (r["framework"], r["model"], r["mode"], r["batch"], r["threads"])
                rows[key].append((r.get("round", 0), r["ms"], r.get("faults_per_step")))
    return rows


def json_lines(paths):
    """Every JSON object on its own line of the files (other lines skipped)."""
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


def step_gflop(paths):
    """(model, mode, batch, threads) -> GFLOP of one of forge's steps, where
    its rows say (f32 rows only: an int8 or bf16 row runs against another
    peak)."""
    return {(r["model"], r["mode"], r["batch"], r["threads"]): r["gflop"]
            for r in json_lines(paths)
            if r.get("bench") in ("train", "infer") and r.get("framework") == "forge"
            and r.get("gflop") and not r["mode"].endswith(("_int8", "_bf16"))}


def f32_peak(paths):
    """The measured f32 FMA peak at a thread count, GFLOP/s: the best of the
    `peak` lines among `paths` for the widest vectors this CPU ran (512-bit
    where AVX-512 exists, else 256-bit); a thread count without its own line
    counts as that many times the one-thread figure. None: no peak lines."""
    peaks = [r for r in json_lines(paths) if r.get("bench") == "peak"]

    def best(width, t):
        return max((p[f"gflops_{width}"] for p in peaks
                    if p.get(f"gflops_{width}") and p.get("threads", 1) == t), default=None)

    p512 = {t: best(512, t) for t in (1, 2)}
    p256 = {t: best(256, t) for t in (1, 2)}
    measured = p512 if p512[1] else p256

    def peak(t):
        if measured.get(t):
            return measured[t]
        return measured[1] * t if measured[1] else None
    return peak


def gemm_table(paths):
    """sgemm GFLOP/s per (shape, threads): forge and torch medians, % of the
    FMA peak measured in the same run (the `peak` lines among `paths`)."""
    runs = defaultdict(list)
    peaks = []
    for r in json_lines(paths):
        if r.get("bench") == "peak":
            peaks.append(r)
        elif r.get("bench") == "gemm" and r.get("ms"):
            key = (r["m"], r["k"], r["n"], r["b_transposed"], r["threads"])
            runs[(r["framework"],) + key].extend(r["ms"])
    if not runs:
        return
    # Measured peaks per thread count (all threads running at once); the
    # widest vectors this CPU runs set its peak: 512-bit where AVX-512
    # exists, else 256-bit (AVX2 + FMA).
    peak = f32_peak(paths)
    width = 512 if any(p.get("gflops_512") for p in peaks) else 256

    def best(width, t):
        return max((p[f"gflops_{width}"] for p in peaks
                    if p.get(f"gflops_{width}") and p.get("threads", 1) == t), default=None)

    p512 = {t: best(512, t) for t in (1, 2)}
    p256 = {t: best(256, t) for t in (1, 2)}
    print("| M x K x N | threads | PyTorch GFLOP/s | forge GFLOP/s | forge / PyTorch (time) "
          f"| forge % of measured {width}-bit peak |")
    print("|---|---|---|---|---|---|")
    keys = sorted({k[1:] for k in runs}, key=lambda k: (k[0] * k[1] * k[2] == 0, k))
    order = [(64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (128, 784, 512), (128, 84, 10),
             (128, 512, 10), (1, 784, 512)]
    keys.sort(key=lambda k: (order.index(k[:3]) if k[:3] in order else 99, k[4]))
    for m, k, n, tb, t in keys:
        flops = 2.0 * m * k * n
        g = {}
        for fw in ("torch", "forge"):
            ms = runs.get((fw, m, k, n, tb, t))
            g[fw] = flops / statistics.median(ms) / 1e6 if ms else None
        shape = f"{m}x{k}x{n}" + (" (x W^T)" if tb else "")
        ratio = f"**{g['torch'] / g['forge']:.2f}**" if g["torch"] and g["forge"] else "-"
        pct512 = f"{100 * g['forge'] / peak(t):.0f}%" if g["forge"] and peak(t) else "-"
        fmt = lambda v: "-" if v is None else f"{v:.1f}"
        print(f"| {shape} | {t} | {fmt(g['torch'])} | {fmt(g['forge'])} | {ratio} | {pct512} |")
    print()
    def fig(v):
        return "-" if v is None else f"{v:.0f}"

    print(f"Peak: this run measured the FMA throughput (best of its readings, each the best of 5) "
          f"at {fig(p512[1])} GFLOP/s on one thread and "
          f"{fig(p512[2])} on two at once with 512-bit vectors, {fig(p256[1])} and {fig(p256[2])} "
          f"with 256-bit vectors ('-': not measured). The last column uses the widest, for the "
          f"row's thread count (twice the one-thread figure where two threads were not measured).")
    tile = {t: max((p["gflops_tile"] for p in peaks
                    if p.get("gflops_tile") and p.get("threads", 1) == t), default=None)
            for t in (1, 2)}
    if tile[1] and p512[1]:
        print()
        print(f"Ceiling: forge's f32 micro-kernel loop (12 x 32 tile, k blocks of 256) on "
              f"cache-resident operands ran at {fig(tile[1])} GFLOP/s on one thread "
              f"({100 * tile[1] / p512[1]:.0f}% of the FMA peak) and {fig(tile[2])} on two: the "
              f"ceiling of forge's f32 products, before their packing and edge tiles.")
    print()


def fmt_ms(v):
    if v is None:
        return "-"
    if v < 0.01:
        # three significant figures: forge's microsecond rows are timed to
        # the nanosecond (PyTorch's script rounds to 0.1 us)
        return f"{v:#.3g}"
    return f"{v:.3f}" if v < 1 else (f"{v:.2f}" if v < 100 else f"{v:.1f}")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: compare_table.py FILE.jsonl [FILE.jsonl ...]")
    gemm_table(sys.argv[1:])
    rows = load(sys.argv[1:])
    if not rows:
        return
    model_order = ["tiny", "mlp", "lenet", "gpt", "gpt_naive", "resnet18", "lstm", "gpt2s",
                   "bert_base"]
    mode_order = ["train", "fwdbwd", "fwd", "infer", "generate"]
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

    gflop, peak = step_gflop(sys.argv[1:]), f32_peak(sys.argv[1:])
    floors = bool(gflop) and peak(1) is not None
    print("| model | mode | batch | threads | PyTorch ms | forge ms | forge / PyTorch "
          "| PyTorch runs | forge runs | forge faults/step |"
          + (" forge % of peak | floor / PyTorch |" if floors else ""))
    print("|---|---|---|---|---|---|---|---|---|---|" + ("---|---|" if floors else ""))
    for k in keys:
        t_med, t_runs, _ = stats("torch", k)
        f_med, f_runs, faults = stats("forge", k)
        ratio = f"**{f_med / t_med:.2f}**" if t_med and f_med else "-"
        fl = "-" if faults is None else f"{faults:.1f}"
        line = (f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {fmt_ms(t_med)} | {fmt_ms(f_med)} | {ratio} "
                f"| {t_runs} | {f_runs} | {fl} |")
        if floors:
            g, p = gflop.get(k), peak(k[3])
            # GFLOP / (GFLOP/s) in ms
            at_peak = 1e3 * g / p if g and p else None
            share = f"{100 * at_peak / f_med:.0f}%" if at_peak and f_med else "-"
            floor = f"{at_peak / t_med:.2f}" if at_peak and t_med else "-"
            line += f" {share} | {floor} |"
        print(line)
    print()
    print("Medians over every timed step of every run (each run's own median in the runs columns); "
          "faults/step: the larger of the runs' minor page faults per timed step."
          + (" % of peak and floor: the row's FLOPs (forge's `gflop`) at the FMA peak measured in "
             "the same run for the row's thread count, as a share of forge's time and divided by "
             "PyTorch's." if floors else ""))
    ort_keys = [k for k in keys if ("ort",) + k in rows]
    if ort_keys:
        # compare.sh --ort: ort_bench.py's lines (ONNX Runtime and PyTorch)
        print()
        print("| model | mode | batch | threads | ONNX Runtime ms | forge ms | forge / ORT "
              "| ORT runs | forge runs |")
        print("|---|---|---|---|---|---|---|---|---|")
        for k in ort_keys:
            o_med, o_runs, _ = stats("ort", k)
            f_med, f_runs, _ = stats("forge", k)
            ratio = f"**{f_med / o_med:.2f}**" if o_med and f_med else "-"
            print(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {fmt_ms(o_med)} | {fmt_ms(f_med)} | {ratio} "
                  f"| {o_runs} | {f_runs} |")


if __name__ == "__main__":
    main()
