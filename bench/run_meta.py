#!/usr/bin/env python3
"""The machine, load and version readings of a bench/compare.sh run (stdlib only).

    run_meta.py machine                          the machine's name for the run's folder
    run_meta.py load-line LABEL UPTIME PLACEMENT one JSON line: a load and placement reading
    run_meta.py write DIR --status N ...          DIR/meta.json (see bench/compare.sh)

The machine's name is derived from /proc/cpuinfo: vendor, model name, CPU
family and model number and hardware threads, e.g. intel-xeon-f6m207-2t.
Machines of one cloud "kind" differ from day to day, so the name says which
CPU it was, not which host.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

# The ISA flags that decide which kernels forge runs and what PyTorch can use.
ISA_FLAGS = ["avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"]


def cpuinfo():
    """The first processor's fields of /proc/cpuinfo ({} where there is none)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    if fields:
                        break
                    continue
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def machine_name():
    info = cpuinfo()
    vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(info.get("vendor_id", ""), "cpu")
    name = info.get("model name", "")
    name = re.sub(r"\((R|TM|tm|r)\)", " ", name)
    name = re.sub(r"@.*$", " ", name)
    name = re.sub(r"\b(Intel|AMD|Processor|CPU|\d+-Core)\b", " ", name, flags=re.IGNORECASE)
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    parts = [vendor] + ([slug] if slug else [])
    if "cpu family" in info and "model" in info:
        parts.append(f"f{info['cpu family']}m{info['model']}")
    parts.append(f"{os.cpu_count() or 1}t")
    return "-".join(parts)


def read_loadavg():
    try:
        with open("/proc/loadavg") as f:
            return [float(v) for v in f.read().split()[:3]]
    except (OSError, ValueError):
        return [None, None, None]


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def load_line(label, utc, uptime, placement):
    """A reading as compare.sh's load() takes it: the load averages from
    `uptime`'s text (read just before the placement probe)."""
    m = re.search(r"([0-9.]+) ns", placement)
    la = re.search(r"load averages?: ([0-9.]+),? ([0-9.]+),? ([0-9.]+)", uptime)
    l1, l5, l15 = (float(v) for v in la.groups()) if la else read_loadavg()
    return json.dumps(dict(when=label, utc=utc, load1=l1, load5=l5, load15=l15,
                           placement_ns=float(m.group(1)) if m else None,
                           uptime=uptime.strip(), placement=placement.strip()))


def output(cmd):
    """A command's stripped stdout, or None when it cannot run."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def json_lines(path):
    """The JSON objects of a file of mixed output, one per line that starts with `{`
    (other lines and unparsable ones skipped; a missing file gives none)."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        pass
    except OSError:
        pass
    return rows


def fma_peak(run_dir):
    """The run's FMA peak per thread count: the best of its readings (the
    peak lines of peak.jsonl and gemm_forge.jsonl); interference can only
    slow the loop down, so the best reading is the machine's."""
    readings = [r for r in json_lines(os.path.join(run_dir, "peak.jsonl")) if r.get("bench") == "peak"]
    for r in json_lines(os.path.join(run_dir, "gemm_forge.jsonl")):
        if r.get("bench") == "peak":
            readings.append(dict(r, when=f"forge gemm round {r.get('round', 0)}"))
    width = 512 if any(r.get("gflops_512") for r in readings) else 256

    def best_of(field):
        best = {}
        for r in readings:
            g = r.get(field)
            t = str(r.get("threads", 1))
            if g and g > best.get(t, 0):
                best[t] = g
        return best

    best = best_of(f"gflops_{width}")
    fields = ("when", "round", "threads", "gflops_512", "gflops_256", "gflops_bf16", "gops_int8",
              "gflops_tile")
    return dict(width_bits=width if best else None, gflops=best,
                bf16_gflops=best_of("gflops_bf16"), int8_gops=best_of("gops_int8"),
                tile_gflops=best_of("gflops_tile"),
                readings=[{k: r.get(k) for k in fields} for r in readings],
                note="f32 FMA throughput on independent accumulators, all threads at once; "
                     "per thread count the best reading of this run. bf16_gflops: AVX-512 BF16 "
                     "vdpbf16ps (GFLOP/s), int8_gops: AVX-512 VNNI vpdpbusd (GOP/s), measured the "
                     "same way where the CPU has them (not AMX); tile_gflops: the f32 micro-kernel's loop "
                     "(12 x 32 tile, k blocks of 256) on cache-resident operands, the ceiling of "
                     "every f32 product")


def git(*args):
    return output(["git", *args])


def write_meta(a):
    info = cpuinfo()
    flags = set(info.get("flags", "").split())
    loads = json_lines(os.path.join(a.dir, "load.jsonl"))
    l1 = [r["load1"] for r in loads if r.get("load1") is not None]
    pl = [r["placement_ns"] for r in loads if r.get("placement_ns") is not None]
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results")
    thp = None
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            m = re.search(r"\[(\w+)\]", f.read())
            thp = m.group(1) if m else None
    except OSError:
        pass
    py = "import sys, importlib\n" \
         "for n in ('torch', 'torchvision'):\n" \
         "    try:\n        print(importlib.import_module(n).__version__)\n" \
         "    except Exception:\n        print('')\n"
    versions = (output([sys.executable, "-W", "ignore", "-c", py]) or "\n").split("\n")
    meta = dict(
        schema=1,
        date=a.started,
        finished=utc_now(),
        complete=a.status == 0,
        exit_status=a.status,
        quick=a.quick == "1",
        machine=a.machine,
        command=a.command,
        env={k: os.environ.get(k) for k in ("OMP_WAIT_POLICY", "TORCH_BENCH", "BENCH_MACHINE",
                                            "FORGE_NUM_THREADS") if os.environ.get(k) is not None},
        pytorch_wait_policy=a.omp,
        suite=a.suite,
        plan=dict(models=a.models.split(","), threads=[int(t) for t in a.threads.split(",")]),
        cpu=dict(model=info.get("model name"), vendor=info.get("vendor_id"),
                 family=info.get("cpu family"), model_number=info.get("model"),
                 stepping=info.get("stepping"),
                 isa={f: f in flags for f in ISA_FLAGS},
                 hypervisor="hypervisor" in flags,
                 hardware_threads=os.cpu_count(),
                 cores=int(info["cpu cores"]) if info.get("cpu cores", "").isdigit() else None,
                 transparent_hugepage=thp,
                 kernel=os.uname().release),
        fma_peak=fma_peak(a.dir),
        load=dict(load1_min=min(l1) if l1 else None, load1_max=max(l1) if l1 else None,
                  placement_ns_min=min(pl) if pl else None, placement_ns_max=max(pl) if pl else None,
                  readings=loads,
                  note="load1: the 1-minute load average; placement_ns: a cache-line round trip "
                       "between two threads (`bench --only placement`), tens of ns on a shared "
                       "last-level cache, hundreds across core complexes"),
        forge=dict(commit=git("rev-parse", "HEAD"), short=git("rev-parse", "--short=7", "HEAD"),
                   dirty=bool(dirty), bench_binary=a.bench_bin),
        rustc=output(["rustc", "--version"]),
        python=sys.version.split()[0],
        torch=versions[0] or None,
        torchvision=(versions[1] if len(versions) > 1 else "") or None,
        files=sorted(f for f in os.listdir(a.dir) if f.endswith(".jsonl")),
    )
    with open(os.path.join(a.dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("machine")
    ll = sub.add_parser("load-line")
    ll.add_argument("label")
    ll.add_argument("utc")
    ll.add_argument("uptime")
    ll.add_argument("placement")
    w = sub.add_parser("write")
    w.add_argument("dir")
    w.add_argument("--status", type=int, required=True)
    w.add_argument("--started", required=True)
    w.add_argument("--command", required=True)
    w.add_argument("--omp", default="")
    w.add_argument("--machine", required=True)
    w.add_argument("--quick", default="0")
    w.add_argument("--models", default="")
    w.add_argument("--threads", default="1,2")
    w.add_argument("--bench-bin", default="")
    w.add_argument("--suite", default="models",
                   help="models: torch_bench.py's plan; hub: infer_bench.py's hub rows (compare.sh --hub)")
    a = ap.parse_args()
    if a.cmd == "machine":
        print(machine_name())
    elif a.cmd == "load-line":
        print(load_line(a.label, a.utc, a.uptime, a.placement))
    else:
        write_meta(a)


if __name__ == "__main__":
    main()
