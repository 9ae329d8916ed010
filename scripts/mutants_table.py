#!/usr/bin/env python3
"""Summarise scripts/mutants.sh results per file, as the table of
docs/src/reliability.md ("Mutation testing") has them.

    python3 scripts/mutants_table.py target/mutants-out/*/mutants.out

Reads each directory's outcomes.json and prints one Markdown row per
mutated file: mutants tested, caught, missed, unviable, timeouts, and the
score caught / (caught + missed) (unviable mutants do not build and are
left out; a timeout counts as caught, as cargo-mutants counts it). With
--missed it lists the missed mutants instead. A mutant tested in several
runs keeps its last outcome (directories in the order given).
"""
import glob
import json
import os
import sys


def mutant_key(scenario):
    m = scenario["Mutant"]
    return (m["file"], m["name"])


def main(args):
    missed_only = "--missed" in args
    dirs = [a for a in args if a != "--missed"]
    last = {}
    for d in dirs:
        path = os.path.join(d, "outcomes.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            data = json.load(f)
        for o in data["outcomes"]:
            s = o["scenario"]
            if not isinstance(s, dict) or "Mutant" not in s:
                continue
            last[mutant_key(s)] = (o["summary"], s["Mutant"])
    if missed_only:
        for key in sorted(last):
            summary, m = last[key]
            if summary == "MissedMutant":
                print(key[1])
        return
    rows = {}
    for key, (summary, _) in last.items():
        r = rows.setdefault(key[0], {"n": 0, "CaughtMutant": 0, "MissedMutant": 0,
                                     "Unviable": 0, "Timeout": 0})
        r["n"] += 1
        r[summary] = r.get(summary, 0) + 1
    print("| File | Tested | Caught | Missed | Unviable | Timeout | Score |")
    print("|---|---|---|---|---|---|---|")
    for file in sorted(rows):
        r = rows[file]
        caught = r["CaughtMutant"] + r["Timeout"]
        viable = caught + r["MissedMutant"]
        score = f"{caught}/{viable} = {100 * caught / viable:.0f}%" if viable else "-"
        print(f"| `{file.removeprefix('forge/src/')}` | {r['n']} | {r['CaughtMutant']} | "
              f"{r['MissedMutant']} | {r['Unviable']} | {r['Timeout']} | {score} |")


if __name__ == "__main__":
    main(sys.argv[1:] or glob.glob("target/mutants-out/*/mutants.out"))
