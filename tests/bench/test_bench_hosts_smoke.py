"""Smoke test of the hosts case at N = 1 and 4: a Volcano job of each size submitted to the stand-in (the tests'
fake API server in a process of its own), every verb run, ``logs -f`` followed and its added lines seen, and the
section and plot rendered (the plot into a scratch folder). No timing is asserted: every subject has one figure
per size, the section has a row per subject, and nothing is left running nor written to docs/ or the real home.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from shimutil import assert_nothing_left

REPO = Path(__file__).resolve().parents[2]
MARK_VAR = "BENCH_SMOKE_TEST_MARK"
SUBJECTS = (
    "bare interpreter (python -c pass)",
    "status ID",
    "list --backend volcano",
    "logs ID",
    "logs -f: start -> every host's first line",
    "logs -f: a line added -> printed (median of its lines)",
    "logs -f: CPU while no line comes (% of one core)",
)
_RUN = """
import datetime, json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from mabench.hosts import hosts_section, run_hosts
result = run_hosts(1, (1, 4))
text = hosts_section(result, "bench/run.py --only hosts", datetime.datetime.now(datetime.timezone.utc), 0.5,
                     {"nproc": "2"}, docs=Path(sys.argv[2]))
print(json.dumps({"series": [s.to_json() for s in result.series], "section": text}))
"""


@pytest.mark.process
def test_the_hosts_case_at_1_and_4_hosts_measures_every_subject(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    env = dict(os.environ, **{MARK_VAR: mark})
    docs = REPO / "docs"
    before = {path.name: path.read_bytes() for path in docs.iterdir() if path.name.startswith("performance")}
    done = subprocess.run([sys.executable, "-c", _RUN, str(REPO / "bench"), str(tmp_path)], cwd=str(tmp_path),
                          env=env, capture_output=True, text=True, timeout=280)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data = json.loads(done.stdout.splitlines()[-1])
    found = {(item["subject"], item["size"]): item for item in data["series"]}
    for subject in SUBJECTS:
        for size in ("1 hosts", "4 hosts"):
            item = found[(subject, size)]
            assert item["error"] is None and len(item["samples"]) == 1, item
            assert item["samples"][0] > 0 or item["unit"] == "%", item  # an idle follower may spend nothing
    section = data["section"]
    assert section.startswith("## Hosts: status, list, logs and logs -f")
    for subject in SUBJECTS:
        row = next(line for line in section.splitlines() if line.startswith(f"| {subject} |"))
        assert row.count(" ms") + row.count(" s |") + row.count(" %") >= 2, row
    assert "<svg" in (tmp_path / "performance-hosts.svg").read_text()
    after = {path.name: path.read_bytes() for path in docs.iterdir() if path.name.startswith("performance")}
    assert after == before, "the smoke run must leave docs/ alone"
    assert_nothing_left(mark, variable=MARK_VAR)
