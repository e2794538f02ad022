#!/usr/bin/env python3
"""One rank of tests/bench/text_startup_bench.sh: runs COMMAND..., copies its
output through, and prints one line when it ends:

  rank RANK: first_step_s S peak_rss_mb M exit C

first_step_s: seconds from the start until the first line of the trainer's
log for update 1 (rank 0 only; train.log_every=1), -1 if none; peak_rss_mb:
the child's peak resident memory (getrusage ru_maxrss)."""
import os
import re
import subprocess
import sys
import time

start = time.monotonic()
proc = subprocess.Popen(sys.argv[1:], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, errors="replace")
first = -1.0
marker = re.compile(os.environ.get("FIRST_STEP_MARKER", r'"update": 1\b|\bupdate 1\b|^\s*1/'))
for line in proc.stderr:
    if first < 0 and marker.search(line):
        first = time.monotonic() - start
    if os.environ.get("RANK_VERBOSE"):
        sys.stderr.write(line)
_, status, usage = os.wait4(proc.pid, 0)
code = os.waitstatus_to_exitcode(status)
print(f"rank {os.environ.get('RANK', '0')}: first_step_s {first:.2f} peak_rss_mb {usage.ru_maxrss / 1024:.0f} "
      f"exit {code}", flush=True)
sys.exit(code)
