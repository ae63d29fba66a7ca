#!/usr/bin/env python3
"""Where the CPU of one benchmark run went, from `perf record -a` data (bench/package.sh
with BENCH_PROFILE=1 calls this for each side).

    bench/cpu_split.py PERF_DATA FREQ COMMAND

Prints CPU-seconds (samples / FREQ) of COMMAND's threads by library: x264, swscale, libavcodec
(split in two for tessera: in the threads that also run x264, i.e. the encode children's
source decode; elsewhere, i.e. the stitch QC decode of every rung and the audio), and the
rest. Why a breakdown and not just wall time: on a noisy 2-core machine the wall-time ratio
moves by 10 % between pairs, while the CPU spent per library is stable enough to say where a
gap comes from.
"""
import subprocess
import sys
from collections import defaultdict

data, freq, command = sys.argv[1], float(sys.argv[2]), sys.argv[3]
out = subprocess.run(
    ["perf", "report", "-i", data, "--sort", "comm,pid,dso", "--stdio", "-F", "sample,comm,pid,dso"],
    check=True, capture_output=True, text=True).stdout

by_thread = defaultdict(lambda: defaultdict(int))
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 4 or line.startswith("#") or not parts[0].isdigit():
        continue
    samples, comm, pid, dso = int(parts[0]), parts[1], parts[2], " ".join(parts[3:])
    if comm != command:
        continue
    by_thread[pid][dso] += samples


def lib(dso):
    for name in ("x264", "swscale", "avcodec"):
        if f"lib{name}" in dso:
            return name
    return "other"


totals = defaultdict(int)
for dsos in by_thread.values():
    encodes = any(lib(d) == "x264" for d in dsos)
    for dso, n in dsos.items():
        key = lib(dso)
        if key == "avcodec":
            key = "avcodec, encode threads" if encodes else "avcodec, other threads"
        totals[key] += n
all_samples = sum(totals.values())
print(f"  {command}: {all_samples / freq:7.1f} CPU-s")
for key in ("x264", "swscale", "avcodec, encode threads", "avcodec, other threads", "other"):
    n = totals.get(key, 0)
    print(f"    {key:26} {n / freq:7.1f} CPU-s  {100 * n / max(all_samples, 1):5.1f} %")
