"""The Volcano stand-in for the ``hosts`` case: the tests' fake Kubernetes + Volcano API server in a process of its
own (so its threads, one per followed pod, do not share the timing process's interpreter), driven by lines on
stdin, each answered by one line on stdout:

- ``pods NS NAME``: ``pods K``, the number of the job's pods whose container runs;
- ``append NS NAME INDEX TEXT``: add the line TEXT to host INDEX's log (its followers are woken);
  ``stamp T``, with ``T`` = ``time.monotonic()`` read just before the line was added;
- ``delete NS NAME``: the job goes (its pods' logs end two ticks later); ``deleted``;
- ``quit`` (or end of input): the server stops.

Usage: ``kube_standin.py KUBECONFIG TICK``; writes KUBECONFIG (namespace ``ml``), then prints ``ready URL``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "sdk"))

from kubefake import FakeKube


def main() -> int:
    kube = FakeKube(tick=float(sys.argv[2]))
    kube.kubeconfig(Path(sys.argv[1]))
    cluster = kube.cluster
    print(f"ready {kube.url}", flush=True)
    try:
        for line in sys.stdin:
            words = line.split(maxsplit=4)
            if not words or words[0] == "quit":
                break
            with cluster.lock:
                job = cluster.jobs.get((words[1], words[2])) if len(words) > 2 else None
                if words[0] == "pods":
                    pods = job.pods if job else []
                    answer = f"pods {sum(1 for p in pods if 'running' in p.state)}"
                elif words[0] == "append" and job is not None:
                    pod = job.pods[int(words[3])]
                    stamp = time.monotonic()
                    pod.append(words[4].rstrip("\n").encode() + b"\n")
                    answer = f"stamp {stamp!r}"
                elif words[0] == "delete" and job is not None:
                    cluster.delete(job)
                    answer = "deleted"
                else:
                    answer = f"error: {line.strip()!r} (no such job or command)"
            print(answer, flush=True)
    finally:
        kube.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
