#!/usr/bin/env python3
"""Streaming and throughput of `cmha translate`, for one or two builds.

    tests/bench/translate_stream_bench.py CKPT SRC BIN [BIN ...] [--threads T] [--rounds N] [-- EXTRA ...]

For each cmha binary BIN (e.g. an old and a new build/cmha copied aside):

* time to first line: start `BIN translate CKPT --threads T`, write SRC's
  first line into its standard input and keep the input open; the seconds
  until its translation comes back (model loading included), or "none in
  30 s" when the command waits for the end of its input; then the latency of
  a second line once the model is loaded.
* throughput: SRC translated from a file (--input SRC --output a file),
  ROUNDS times, the binaries interleaved; the median sentences/s of the wall
  time, and of the CPU time (user + system of the child, which a busy machine
  disturbs less).

EXTRA arguments go to every `translate` call (e.g. `-- --lenpen 1` to give an
old build, whose built-in defaults differed, the checkpoint's settings).
Take figures on a quiet machine (uptime load below 1 on 2 cores).
"""
import argparse
import os
import resource
import select
import statistics
import subprocess
import sys
import tempfile
import time


def read_line(proc, timeout):
    """One line of proc's standard output within `timeout` seconds, else None."""
    end, buf = time.time() + timeout, b""
    while time.time() < end:
        ready, _, _ = select.select([proc.stdout], [], [], 0.05)
        if ready:
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                return None
            buf += chunk
            if b"\n" in buf:
                return buf
    return None


def first_line(binary, args, lines):
    start = time.time()
    proc = subprocess.Popen([binary, "translate"] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    proc.stdin.write(lines[0] + b"\n")
    proc.stdin.flush()
    if read_line(proc, 30) is None:
        closed = time.time()
        proc.stdin.close()
        read_line(proc, 300)
        proc.wait()
        return "none in 30 s with the input open (waits for its end); %.2f s after closing it" % (time.time() - closed)
    first = time.time() - start
    sent = time.time()
    proc.stdin.write(lines[1] + b"\n")
    proc.stdin.flush()
    read_line(proc, 60)
    second = time.time() - sent
    proc.stdin.close()
    proc.wait()
    return "%.2f s (model loading included); the next line %.3f s" % (first, second)


def throughput_run(binary, args, src, out):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    subprocess.run([binary, "translate"] + args + ["--input", src, "--output", out], check=True,
                   stderr=subprocess.DEVNULL)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ckpt")
    ap.add_argument("src")
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args = [a.ckpt, "--threads", str(a.threads)] + extra
    with open(a.src, "rb") as f:
        lines = f.read().splitlines()
    print("load average %s | %d lines of %s | %d threads | extra %s" %
          (os.getloadavg()[0], len(lines), a.src, a.threads, " ".join(extra) or "none"))
    for b in a.binaries:
        print("%s: time to first line: %s" % (b, first_line(b, args, lines)))
    times = {b: [] for b in a.binaries}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = a.binaries if r % 2 == 0 else list(reversed(a.binaries))
            for b in order:
                times[b].append(throughput_run(b, args, a.src, os.path.join(tmp, "%d.out" % a.binaries.index(b))))
        outputs = [open(os.path.join(tmp, "%d.out" % i), "rb").read() for i in range(len(a.binaries))]
    for b in a.binaries:
        wall = statistics.median(t[0] for t in times[b])
        cpu = statistics.median(t[1] for t in times[b])
        print("%s: %d lines from a file: median of %d: %.1f s wall (%.1f sentences/s), %.1f s CPU (%.1f sentences/s)"
              "; walls %s" % (b, len(lines), a.rounds, wall, len(lines) / wall, cpu, len(lines) / cpu,
                              " ".join("%.1f" % t[0] for t in times[b])))
    print("translations: " + ("the same from every binary" if all(o == outputs[0] for o in outputs) else "DIFFERENT"))
    print("load average %s" % os.getloadavg()[0])


if __name__ == "__main__":
    main()
