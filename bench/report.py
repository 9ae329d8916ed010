#!/usr/bin/env python3
"""Generates bench/results/CURRENT.md and the README's performance table from
the run folders of bench/compare.sh (bench/results/<date>_<machine>_<commit>/).
Standard library only.

    python3 bench/report.py                           write CURRENT.md, print the README block
    python3 bench/report.py --update-readme README.md also replace the README's block
    python3 bench/report.py --check                   regenerate in memory and compare: exit 1
                                                      when CURRENT.md (or the README's block,
                                                      where README.md has the markers) differs

CURRENT.md holds, per machine, its latest complete run of the full plan (a
`--quick` or incomplete run only where the machine has no other): step-time
medians of both frameworks per (model, mode, batch, threads), the ratio
forge / PyTorch, the sgemm table with percentages of the FMA peak measured
in that same run, and the run's date, commit, CPU, load and placement. The
README's block is the latest of those runs, one row per (model, mode,
batch) with the 1- and 2-thread ratios. Nothing in either depends on when
the script runs, so --check can compare byte for byte.
"""
import argparse
import difflib
import json
import os
import statistics
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from compare_table import fmt_ms  # noqa: E402  (the same number format as compare.sh's table)
from run_meta import json_lines  # noqa: E402  (one reader of the raw JSON lines)

BEGIN = "<!-- bench-table:begin -->"
END = "<!-- bench-table:end -->"
MODEL_ORDER = ["tiny", "mlp", "lenet", "gpt", "gpt_naive", "resnet18", "lstm", "gpt2s", "bert_base"]
MODE_ORDER = ["train", "fwdbwd", "fwd", "infer", "generate"]
# Rows of forge's bench and of PyTorch's scripts: torch_bench.py's say
# "train", infer_bench.py's (compare.sh --hub) "infer".
STEP_BENCHES = ("train", "infer")
# The models of `bench --json`'s default plan (examples/bench_sections/json.rs DEFAULT_MODELS).
DEFAULT_PLAN = ["tiny", "mlp", "lenet", "gpt", "resnet18", "lstm"]
GEMM_ORDER = [(64, 64, 64), (256, 256, 256), (1024, 1024, 1024), (128, 784, 512), (128, 84, 10),
              (128, 512, 10), (1, 784, 512)]


class Run:
    """One run folder: its meta.json and JSON lines."""

    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        with open(os.path.join(path, "meta.json")) as f:
            self.meta = json.load(f)
        self.lines = [r for name in sorted(os.listdir(path)) if name.endswith(".jsonl")
                      for r in json_lines(os.path.join(path, name))]

    @property
    def suite(self):
        """models (compare.sh: torch_bench.py's plan) or hub (compare.sh --hub)."""
        return self.meta.get("suite", "models")

    @property
    def full(self):
        """Complete, not --quick and, for the models suite, every model of the default plan: a
        run of a few models (`compare.sh --models lstm`) is listed but does not stand for its
        machine in CURRENT.md."""
        if not self.meta.get("complete", False) or self.meta.get("quick", False):
            return False
        if self.suite != "models":
            return True
        models = self.meta.get("plan", {}).get("models", DEFAULT_PLAN)
        return set(DEFAULT_PLAN) <= set(models)

    def steps(self):
        """(model, mode, batch, threads) -> framework -> list of (round, ms list, faults)."""
        out = {}
        for r in self.lines:
            if r.get("bench") not in STEP_BENCHES or not r.get("ms"):
                continue
            key = (r["model"], r["mode"], r["batch"], r["threads"])
            out.setdefault(key, {}).setdefault(r["framework"], []).append(
                (r.get("round", 0), r["ms"], r.get("faults_per_step")))
        return out

    def step_gflop(self):
        """(model, mode, batch, threads) -> GFLOP of one step, from forge's rows that state it."""
        return {(r["model"], r["mode"], r["batch"], r["threads"]): r["gflop"] for r in self.lines
                if r.get("bench") in STEP_BENCHES and r.get("framework") == "forge" and r.get("gflop")}

    def gemm(self):
        """(m, k, n, b_transposed, threads) -> framework -> every ms sample."""
        out = {}
        for r in self.lines:
            if r.get("bench") == "gemm" and r.get("ms"):
                key = (r["m"], r["k"], r["n"], r["b_transposed"], r["threads"])
                out.setdefault(key, {}).setdefault(r["framework"], []).extend(r["ms"])
        return out

    def peak(self, threads, mode=""):
        """The measured peak a row's arithmetic runs against at `threads`: the f32 FMA peak, or
        for `*_bf16` and `*_int8` rows the vdpbf16ps / vpdpbusd peak where the run measured it
        (`None` for those rows otherwise, and for every reduced-precision row on a CPU with AMX,
        whose tiles those rows use and the bench does not measure)."""
        p = self.meta.get("fma_peak") or {}
        field = "gflops"
        if mode.endswith("_bf16") or mode.endswith("_int8"):
            if self.has_amx():
                return None
            field = "bf16_gflops" if mode.endswith("_bf16") else "int8_gops"
        return (p.get(field) or {}).get(str(threads))

    def has_amx(self):
        isa = (self.meta.get("cpu") or {}).get("isa") or {}
        return any(str(f).startswith("amx") and on for f, on in isa.items())


def step_key(k):
    model, mode, batch, threads = k
    return (MODEL_ORDER.index(model) if model in MODEL_ORDER else 99, model,
            MODE_ORDER.index(mode) if mode in MODE_ORDER else 99, mode, batch, threads)


def medians(runs):
    """Pooled median, each round's median, the largest faults/step."""
    if not runs:
        return None, "-", None
    runs = sorted(runs, key=lambda r: r[0])
    pooled = [v for _, ms, _ in runs for v in ms]
    per_round = " / ".join(fmt_ms(statistics.median(ms)) for _, ms, _ in runs)
    faults = [f for _, _, f in runs if f is not None]
    return statistics.median(pooled), per_round, (max(faults) if faults else None)


def ratios(run):
    """(model, mode, batch, threads) -> forge / PyTorch of the pooled medians (or None)."""
    out = {}
    for k, fw in run.steps().items():
        t, f = medians(fw.get("torch", []))[0], medians(fw.get("forge", []))[0]
        out[k] = f / t if t and f else None
    return out


def fmt_ratio(r):
    return "-" if r is None else f"**{r:.2f}**"


def fmt_range(lo, hi, fmt):
    if lo is None:
        return "not read"
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}-{fmt(hi)}"


def when(meta):
    """'2026-12-05 04:15-04:40 UTC' from the run's start and end."""
    start, end = meta.get("date", ""), meta.get("finished", "")
    s = start.replace("T", " ")[:16]
    if end[:10] == start[:10]:
        return f"{s}-{end[11:16]} UTC"
    return f"{s} UTC" + (f" - {end.replace('T', ' ')[:16]} UTC" if end else "")


def load_text(meta):
    ld = meta.get("load") or {}
    return fmt_range(ld.get("load1_min"), ld.get("load1_max"), lambda v: f"{v:.1f}")


def placement_text(meta):
    ld = meta.get("load") or {}
    return fmt_range(ld.get("placement_ns_min"), ld.get("placement_ns_max"), lambda v: f"{v:.0f}")


def commit_text(meta):
    fg = meta.get("forge") or {}
    c = fg.get("short") or "unknown"
    return c + (" (with uncommitted changes)" if fg.get("dirty") else "")


def isa_text(meta):
    isa = (meta.get("cpu") or {}).get("isa") or {}
    have = [f for f, v in isa.items() if v]
    return ", ".join(have) if have else "none of avx2, fma, avx512f, avx512_vnni, avx512_bf16"


def widest_isa(meta):
    isa = (meta.get("cpu") or {}).get("isa") or {}
    if isa.get("avx512f"):
        return "AVX-512"
    if isa.get("avx2") and isa.get("fma"):
        return "AVX2 + FMA"
    return "no AVX2"


def run_section(run, rel, title=""):
    m = run.meta
    cpu = m.get("cpu") or {}
    peak = m.get("fma_peak") or {}
    width = peak.get("width_bits")
    g = peak.get("gflops") or {}
    peak_txt = (", ".join(f"{t} thread{'s' if t != '1' else ''} {v:.0f} GFLOP/s" for t, v in sorted(g.items()))
                + f" ({width}-bit vectors)") if g else "not measured"
    for field, name, unit in (("bf16_gflops", "bf16 (vdpbf16ps)", "GFLOP/s"), ("int8_gops", "int8 (vpdpbusd)", "GOP/s")):
        d = peak.get(field) or {}
        if d:
            peak_txt += f"; {name}: " + ", ".join(f"{t} thread{'s' if t != '1' else ''} {v:.0f} {unit}"
                                                 for t, v in sorted(d.items()))
    kind = []
    if not m.get("complete", False):
        kind.append(f"**incomplete** (stopped with status {m.get('exit_status')}; the blocks that finished)")
    if m.get("quick"):
        kind.append("**a --quick smoke run** (2 rounds of 3 steps: not a measurement to quote)")
    out = [f"## {m.get('machine', '?')}{title}", ""]
    if kind:
        out += ["This is " + " and ".join(kind) + ".", ""]
    out += [
        f"- Run: [{run.name}]({rel}/) ({', '.join(m.get('files', []))}, meta.json)",
        f"- Date: {when(m)}",
        f"- forge commit: {commit_text(m)}; {m.get('rustc') or 'rustc unknown'}",
        f"- CPU: {cpu.get('model', '?')} (family {cpu.get('family', '?')}, model {cpu.get('model_number', '?')}), "
        f"{cpu.get('hardware_threads', '?')} hardware threads"
        + (", under a hypervisor" if cpu.get("hypervisor") else "") + f"; ISA: {isa_text(m)}",
        f"- FMA peak measured in this run (f32, all threads at once, best reading): {peak_txt}"
        + (" (the bf16 and int8 rows' % of peak divide by these)" if (peak.get("bf16_gflops") or peak.get("int8_gops")) else ""),
        f"- Load average (1 min) over the run: {load_text(m)}; thread placement (cache-line round trip): "
        f"{placement_text(m)} ns",
        f"- PyTorch {m.get('torch') or '?'}"
        + (f" (torchvision {m['torchvision']})" if m.get("torchvision") else "")
        + f", Python {m.get('python', '?')}, {m.get('pytorch_wait_policy') or 'OMP_WAIT_POLICY not recorded'}",
        f"- Command: `{m.get('command', '?')}`",
        "",
    ]
    steps = run.steps()
    gflop = run.step_gflop()
    if steps:
        # Runs whose forge rows state each step's GFLOP (matrix products and
        # convolutions) also show the rate and its share of this run's
        # measured FMA peak at that thread count: the distance to the limit.
        peak_cols = bool(gflop)
        over_peak = False
        head = ("| model | mode | batch | threads | PyTorch ms | forge ms | forge / PyTorch | PyTorch rounds "
                "| forge rounds | forge faults/step |")
        rule = "|---|---|---|---|---|---|---|---|---|---|"
        if peak_cols:
            # The floor: forge's FLOPs of the step at the run's measured
            # peak, divided by PyTorch's time: the ratio a step doing those
            # FLOPs would read if every one ran at the peak and nothing
            # else took time. A target below it cannot be met on this
            # machine by computing the same products faster, only by
            # computing fewer.
            head += " forge GFLOP/s | forge % of peak | floor / PyTorch |"
            rule += "---|---|---|"
        out += [head, rule]
        for k in sorted(steps, key=step_key):
            t_med, t_runs, _ = medians(steps[k].get("torch", []))
            f_med, f_runs, faults = medians(steps[k].get("forge", []))
            ratio = fmt_ratio(f_med / t_med if t_med and f_med else None)
            fl = "-" if faults is None else f"{faults:.1f}"
            row = (f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {fmt_ms(t_med)} | {fmt_ms(f_med)} | {ratio} "
                   f"| {t_runs} | {f_runs} | {fl} |")
            if peak_cols:
                g, p = gflop.get(k), run.peak(k[3], k[1])
                rate = g / f_med * 1e3 if g and f_med else None
                row += (f" {rate:.1f} |" if rate else " - |") + (f" {100 * rate / p:.0f}% |" if rate and p else " - |")
                floor = g / p * 1e3 / t_med if g and p and t_med else None
                row += f" {floor:.2f} |" if floor else " - |"
                over_peak = over_peak or bool(rate and p and rate > p)
            out.append(row)
        out.append("")
        if over_peak:
            out += ["Steps above 100% of peak: the run's peak readings were held down (by the load, or the host) "
                    "while the steps ran at other moments, so its percentages overstate them.", ""]
    gemm = run.gemm()
    if gemm:
        out += [f"| M x K x N | threads | PyTorch GFLOP/s | forge GFLOP/s | forge / PyTorch (time) "
                f"| forge % of this run's peak |",
                "|---|---|---|---|---|---|"]
        keys = sorted(gemm, key=lambda k: (GEMM_ORDER.index(k[:3]) if k[:3] in GEMM_ORDER else 99, k))
        over = False
        for k in keys:
            m_, k_, n_, tb, t = k
            flops = 2.0 * m_ * k_ * n_
            gf = {fw: flops / statistics.median(ms) / 1e6 for fw, ms in gemm[k].items() if ms}
            ratio = fmt_ratio(gf["torch"] / gf["forge"] if "torch" in gf and "forge" in gf else None)
            p = run.peak(t)
            pct = f"{100 * gf['forge'] / p:.0f}%" if "forge" in gf and p else "-"
            shape = f"{m_}x{k_}x{n_}" + (" (x W^T)" if tb else "")
            out.append(f"| {shape} | {t} | {gf.get('torch', 0):.1f} | {gf.get('forge', 0):.1f} | {ratio} | {pct} |"
                       .replace("| 0.0 |", "| - |"))
            over = over or ("forge" in gf and p and gf["forge"] > p)
        out.append("")
        if over:
            out += ["Rows above 100%: this run's peak readings were held down (by the load, or the host), "
                    "so its percentages of peak overstate the kernel.", ""]
    return out


def all_runs(results):
    runs = []
    if not os.path.isdir(results):
        return runs
    for name in sorted(os.listdir(results)):
        path = os.path.join(results, name)
        if os.path.isfile(os.path.join(path, "meta.json")):
            runs.append(Run(path))
    runs.sort(key=lambda r: (r.meta.get("date", ""), r.name))
    return runs


def current(runs, suite="models"):
    """The latest full run of `suite` per machine (else its latest run), oldest machine first."""
    by_machine = {}
    for r in runs:
        if r.suite != suite:
            continue
        by_machine.setdefault(r.meta.get("machine", "?"), []).append(r)
    picked = []
    for rs in by_machine.values():
        full = [r for r in rs if r.full]
        picked.append((full or rs)[-1])
    picked.sort(key=lambda r: (r.meta.get("date", ""), r.name))
    return picked


def render_current(runs):
    out = [
        "# Current benchmark results",
        "",
        "Generated by `python3 bench/report.py` from the run folders beside this file (written by",
        "`bench/compare.sh`); do not edit by hand: CI runs `python3 bench/report.py --check`.",
        "One section per machine, its latest complete run of the full plan. Ratios divide forge's",
        "median step time by PyTorch's from the same run (below 1: forge is faster); medians pool",
        "every timed step of both rounds, and the rounds columns give each round's own median.",
        "sgemm percentages divide by the FMA peak measured in the same run on the same machine.",
        "Compare ratios, not times across runs: the machines of one cloud kind change from day",
        "to day. Experiments tried and not kept: [../EXPERIMENTS.md](../EXPERIMENTS.md); runs",
        "before these folders existed: [HISTORY.md](HISTORY.md).",
        "",
    ]
    picked = current(runs)
    if not picked:
        out += ["No run yet: `bash bench/compare.sh`.", ""]
    for r in reversed(picked):
        out += run_section(r, r.name)
    # The Hugging Face-shaped rows (compare.sh --hub: forge's hub against
    # transformers, infer_bench.py) are a plan of their own: their latest
    # run per machine, after the main plan's.
    for r in reversed(current(runs, "hub")):
        out += run_section(r, r.name, " - hub models against transformers (compare.sh --hub)")
    if runs:
        out += ["## Every run", "", "| run | machine | commit | plan | load |", "|---|---|---|---|---|"]
        for r in reversed(runs):
            m = r.meta
            plan = "quick" if m.get("quick") else "full"
            if r.suite != "models":
                plan = f"{r.suite} {plan}"
            if not m.get("complete", False):
                plan += ", incomplete"
            models = ",".join((m.get("plan") or {}).get("models", []))
            out.append(f"| [{r.name}]({r.name}/) | {m.get('machine', '?')} | {commit_text(m)} | {plan}: {models} "
                       f"| {load_text(m)} |")
        out.append("")
    return "\n".join(out)


def render_readme(runs):
    """The README's block (between the markers), from the latest current run."""
    picked = current(runs)
    if not picked:
        return "No benchmark run yet: `bash bench/compare.sh`, then `python3 bench/report.py`.\n"
    run = max(picked, key=lambda r: (r.full, r.meta.get("date", ""), r.name))
    m = run.meta
    rt = ratios(run)
    # Rows that PyTorch's side does not time (resnet18 fwd/fwdbwd without
    # --phases) have no ratio and stay in CURRENT.md only.
    rows = sorted({k[:3] for k, r in rt.items() if r is not None}, key=lambda k: step_key(k + (0,)))
    threads = sorted({k[3] for k in rt})
    head = " | ".join(f"{t} thread{'s' if t != 1 else ''}" for t in threads)
    out = [f"| model | mode | batch | {head} |", "|---|---|---|" + "---|" * len(threads)]
    for k in rows:
        cells = " | ".join(fmt_ratio(rt.get(k + (t,))) for t in threads)
        out.append(f"| {k[0]} | {k[1]} | {k[2]} | {cells} |")
    cpu = m.get("cpu") or {}
    caveat = ""
    if not run.full:
        caveat = " (a --quick or incomplete run: not a measurement to quote)"
    # The date only: the README holds no times of day (tests/misc/readme_example.rs
    # rejects "hh:mm UTC"); CURRENT.md has the run's start and end.
    out += [""] + textwrap.wrap(
        f"Measured on {m.get('date', '?')[:10]}{caveat} at forge commit {commit_text(m)} on "
        f"{m.get('machine', '?')} ({cpu.get('model', '?')}, {cpu.get('hardware_threads', '?')} "
        f"hardware threads, {widest_isa(m)}) against PyTorch {m.get('torch') or '?'}, load "
        f"average {load_text(m)}: step times, the sgemm table and the machine's details in "
        f"[bench/results/CURRENT.md](bench/results/CURRENT.md), the raw data in "
        f"[bench/results/{run.name}/](bench/results/{run.name}/).",
        width=100, break_long_words=False, break_on_hyphens=False)
    return "\n".join(out) + "\n"


def replace_block(text, block, path):
    b, e = text.find(BEGIN), text.find(END)
    if b < 0 or e < b:
        sys.exit(f"report.py: {path} has no {BEGIN} ... {END} block")
    return text[:b + len(BEGIN)] + "\n" + block + text[e:]


def diff(old, new, name):
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        f"{name} (on disk)", f"{name} (regenerated)"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results"),
                    help="the folder of run folders (default bench/results)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when CURRENT.md or the README's block is stale")
    ap.add_argument("--update-readme", metavar="FILE",
                    help="replace the text between the bench-table markers in FILE")
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"),
                    help="the README that --check compares where it has the markers")
    a = ap.parse_args()
    runs = all_runs(a.results)
    current_md = render_current(runs)
    block = render_readme(runs)
    current_path = os.path.relpath(os.path.join(a.results, "CURRENT.md"))
    if a.check:
        stale = []
        old = open(current_path).read() if os.path.exists(current_path) else ""
        if old != current_md:
            stale.append(diff(old, current_md, current_path))
        readme = os.path.relpath(a.update_readme or a.readme)
        if os.path.exists(readme):
            text = open(readme).read()
            if BEGIN in text and END in text and replace_block(text, block, readme) != text:
                stale.append(diff(text, replace_block(text, block, readme), readme))
        if stale:
            sys.stdout.write("".join(stale))
            sys.exit("report.py --check: generated benchmark tables are stale; run "
                     "`python3 bench/report.py --update-readme README.md` and commit")
        print(f"report.py --check: {current_path} and the README block match {len(runs)} run(s)")
        return
    with open(current_path, "w") as f:
        f.write(current_md)
    if a.update_readme:
        with open(a.update_readme) as f:
            text = f.read()
        with open(a.update_readme, "w") as f:
            f.write(replace_block(text, block, a.update_readme))
    sys.stdout.write(f"{BEGIN}\n{block}{END}\n")


if __name__ == "__main__":
    main()
