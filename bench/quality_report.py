#!/usr/bin/env python3
"""The figures of bench/quality.sh from its results.tsv.

    bench/quality_report.py RESULTS STRICT

Per run and target: the single CRF that reaches the target output's worst-segment VMAF
(linear between the sweep's points, which fall as the CRF rises), the bits that CRF would
take (log-linear between the same points) and the CPU it would take (linear); then the
target's savings, mean, worst segment, spread and CPU ratio. Prints the median of each over
runs and checks the issue's goals; with STRICT 1 a missed goal exits 2.
"""
import math
import statistics
import sys
from collections import defaultdict


def rows(path):
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(head, line.rstrip("\n").split("\t")))
            segments = [float(v) for v in r["segments"].split(",") if v]
            yield {
                "run": int(r["run"]),
                "mode": r["mode"],
                "value": float(r["value"]),
                "bits": int(r["bytes"]) * 8,
                "cpu": float(r["cpu_s"]),
                "mean": float(r["mean"]),
                "segments": segments,
            }


def interpolate(points, x):
    """y at x on the polyline through points (x ascending); None outside."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return None


def equivalent(sweep, worst):
    """(crf, bits, cpu) of the single CRF whose worst segment is `worst`, or None."""
    # Worst-segment VMAF against CRF, turned to ascending VMAF for the lookup.
    by_vmaf = sorted((min(r["segments"]), r["value"]) for r in sweep)
    crf = interpolate(by_vmaf, worst)
    if crf is None:
        return None
    by_crf = sorted((r["value"], math.log(r["bits"])) for r in sweep)
    cpu = sorted((r["value"], r["cpu"]) for r in sweep)
    return crf, math.exp(interpolate(by_crf, crf)), interpolate(cpu, crf)


def main():
    path, strict = sys.argv[1], sys.argv[2] == "1"
    by_run = defaultdict(list)
    for r in rows(path):
        by_run[r["run"]].append(r)
    figures = defaultdict(lambda: defaultdict(list))
    for run, rs in sorted(by_run.items()):
        sweep = [r for r in rs if r["mode"] == "crf"]
        for t in (r for r in rs if r["mode"] == "target"):
            worst = min(t["segments"])
            eq = equivalent(sweep, worst)
            f = figures[t["value"]]
            f["mean"].append(t["mean"])
            f["worst"].append(worst)
            f["spread"].append(max(t["segments"]) - worst)
            f["mbits"].append(t["bits"] / 1e6)
            if eq is None:
                print(f"run {run}, target {t['value']:g}: worst segment {worst:.2f} is "
                      "outside the sweep; widen BENCH_CRFS")
                continue
            crf, bits, cpu = eq
            f["crf"].append(crf)
            f["savings"].append(100 * (1 - t["bits"] / bits))
            f["cpu_ratio"].append(t["cpu"] / cpu)
        for r in sweep:
            s = figures[("crf", r["value"])]
            s["mbits"].append(r["bits"] / 1e6)
            s["mean"].append(r["mean"])
            s["worst"].append(min(r["segments"]))
            s["spread"].append(max(r["segments"]) - min(r["segments"]))
            s["cpu"].append(r["cpu"])

    med = lambda v: statistics.median(v) if v else float("nan")
    print("\nfixed CRF sweep (medians over runs):")
    print("  crf    Mbit   mean  worst  spread   cpu_s")
    for key in sorted(k for k in figures if isinstance(k, tuple)):
        s = figures[key]
        print(f"  {key[1]:4g} {med(s['mbits']):7.2f} {med(s['mean']):6.2f} "
              f"{med(s['worst']):6.2f} {med(s['spread']):7.2f} {med(s['cpu']):7.1f}")
    print("\ntarget mode (medians over runs):")
    missed = []
    for target in sorted(k for k in figures if not isinstance(k, tuple)):
        f = figures[target]
        savings, cpu = med(f["savings"]), med(f["cpu_ratio"])
        mean, worst = med(f["mean"]), med(f["worst"])
        print(f"  target {target:g}: {med(f['mbits']):.2f} Mbit, mean VMAF {mean:.2f}, worst "
              f"segment {worst:.2f}, spread {med(f['spread']):.2f}; the single CRF with that "
              f"worst segment is {med(f['crf']):.2f}: {savings:.1f} % fewer bits; CPU "
              f"{cpu:.2f}x the fixed-CRF encode")
        checks = [
            (savings >= 15.0, f"savings {savings:.1f} % < 15 %"),
            (abs(mean - target) <= 1.0, f"mean {mean:.2f} not within 1.0 of {target:g}"),
            (worst >= target - 2.0, f"worst segment {worst:.2f} more than 2.0 below {target:g}"),
            (cpu <= 1.5, f"CPU {cpu:.2f}x > 1.5x"),
        ]
        missed += [f"target {target:g}: {why}" for ok, why in checks if not ok]
    print()
    for m in missed:
        print(f"MISSED: {m}")
    if not missed:
        print("every goal met")
    if strict and missed:
        sys.exit(2)


if __name__ == "__main__":
    main()
