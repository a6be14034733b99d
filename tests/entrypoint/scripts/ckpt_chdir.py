"""A rank that changes its working folder first (as scripts do to find their data files), then counts to TOTAL
through the checkpoint helper: it resumes from ``checkpoint.resume_from()``, saves every step and kills itself
(SIGKILL) once, after its save of step 2 in attempt 0. At the end it writes what it resumed from and the steps it
counted to OUT.

Usage: ckpt_chdir.py ELSEWHERE OUT TOTAL
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from malaunch.entrypoint import checkpoint

elsewhere, out, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.chdir(elsewhere)
resume = checkpoint.resume_from()
start = 0
if resume is not None:
    with open(os.path.join(resume, "count.json"), encoding="utf-8") as handle:
        start = json.load(handle)["count"]
counted = []
for step in range(start, total):
    counted.append(step + 1)
    with checkpoint.save(step + 1) as folder:
        Path(folder, "count.json").write_text(json.dumps({"count": step + 1}), encoding="utf-8")
    if step + 1 == 2 and os.environ.get("MALAUNCH_ATTEMPT") == "0":
        os.kill(os.getpid(), signal.SIGKILL)
with open(out, "w", encoding="utf-8") as handle:
    json.dump({"resume": resume, "counted": counted}, handle)
