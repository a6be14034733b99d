"""Local-backend client for the benchmark: submit a 4 hosts x 4 ranks job through the SDK, wait, report JSON.

``local_submit.py CODE_DIR [--hosts H] [--devices D]`` builds ``Job(name=..., code_dir=CODE_DIR,
boot_file="train.py", run_method="ranktable", resources={hosts, devices_per_host}, backend="local")``, submits
it (the local backend's home is ``$MALAUNCH_HOME``, set by the harness) and waits for it to end, polling every
20 ms. Prints one JSON line: ``{"available": true, "submit": s, "total": s, "state": ..., "exit_code": ...}``
(times from just before ``submit()``), or ``{"available": false, "why": ...}`` when the SDK or its local
backend is not there yet.
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("code_dir")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--devices", type=int, default=4)
    args = parser.parse_args()
    try:
        from malaunch.sdk import Job
        from malaunch.sdk.backends import available_backends
    except ImportError as exc:
        print(json.dumps({"available": False, "why": f"SDK not importable: {exc}"}))
        return
    if "local" not in available_backends():
        print(json.dumps({"available": False, "why": "the SDK has no local backend yet"}))
        return
    job = Job(
        name="bench-local",
        code_dir=args.code_dir,
        boot_file="train.py",
        run_method="ranktable",
        resources={"hosts": args.hosts, "devices_per_host": args.devices},
        backend="local",
    )
    began = time.monotonic()
    try:
        handle = job.submit()
    except Exception as exc:  # the SDK's BackendNotAvailable: a release without the local backend
        if type(exc).__name__ != "BackendNotAvailable":
            raise
        print(json.dumps({"available": False, "why": str(exc)}))
        return
    submitted = time.monotonic()
    status = handle.wait(timeout=300, poll_interval=0.02)
    done = time.monotonic()
    print(
        json.dumps(
            {
                "available": True,
                "submit": submitted - began,
                "total": done - began,
                "state": status.state.value,
                "exit_code": status.exit_code,
                "job_id": handle.id,
            }
        )
    )


if __name__ == "__main__":
    main()
