"""A rank of the hang tests: what it does depends on its host and the job's attempt.

``HANG_PLAN`` holds ``attempt:host=action`` or ``attempt:host:rank=action`` items (comma-separated; a rank's own
item wins); the default action is ``ok``:
- ``ok``: say so and exit 0; ``env``: print MALAUNCH_PROGRESS_FILE and whether that file exists, exit 0;
- ``stop``: stop itself (SIGSTOP); ``spin``: a silent busy loop; ``pipe``: block reading a pipe nobody writes;
  ``sleep``: sleep silently for 600 s;
- ``chatty``: a line every 0.3 s for ``HANG_SECONDS`` seconds, then exit 0;
- ``quiet``: print nothing for ``HANG_SECONDS`` seconds, then exit 0;
- ``progress``: touch the progress file every 0.3 s for ``HANG_SECONDS`` seconds, printing nothing, then exit 0.
- ``collective``: wait until ``HANG_PEERS`` ranks of its host are ready (a barrier of files), say it entered the
  collective (rank ``HANG_LATE`` says it ``HANG_DELAY`` s after the others) and wait silently for 600 s.
Each start leaves ``started-h<host>-a<attempt>`` in ``HANG_JOB_DIR``.
"""

import os
import signal
import sys
import time

attempt = int(os.environ.get("MALAUNCH_ATTEMPT", "0"))
host = int(os.environ.get("VC_TASK_INDEX", "0"))
plan = dict(item.split("=", 1) for item in os.environ.get("HANG_PLAN", "").split(",") if "=" in item)
rank = os.environ.get("RANK", "")
action = plan.get(f"{attempt}:{host}:{rank}", plan.get(f"{attempt}:{host}", "ok"))
seconds = float(os.environ.get("HANG_SECONDS", "0"))
open(os.path.join(os.environ["HANG_JOB_DIR"], f"started-h{host}-a{attempt}"), "w").close()
print(f"host {host} attempt {attempt}: {action}" + (f" (rank {rank})" if rank else ""), flush=True)
if action == "env":
    path = os.environ.get("MALAUNCH_PROGRESS_FILE")
    print(f"progress file: {path} exists: {path is not None and os.path.isfile(path)}", flush=True)
elif action == "stop":
    os.kill(os.getpid(), signal.SIGSTOP)
elif action == "spin":
    while True:
        pass
elif action == "pipe":
    read_end, write_end = os.pipe()
    os.read(read_end, 1)
elif action == "sleep":
    time.sleep(600)
elif action == "quiet":
    time.sleep(seconds)
elif action in ("chatty", "progress"):
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if action == "chatty":
            print("still working", flush=True)
        else:
            os.utime(os.environ["MALAUNCH_PROGRESS_FILE"])
        time.sleep(0.3)
elif action == "collective":
    folder = os.environ["HANG_JOB_DIR"]
    open(os.path.join(folder, f"ready-h{host}-a{attempt}-r{rank}"), "w").close()
    while len([name for name in os.listdir(folder) if name.startswith(f"ready-h{host}-a{attempt}-")]) < int(
        os.environ.get("HANG_PEERS", "1")
    ):
        time.sleep(0.01)
    if rank == os.environ.get("HANG_LATE"):
        time.sleep(float(os.environ.get("HANG_DELAY", "0")))
    print(f"rank {rank} entered the collective", flush=True)
    time.sleep(600)
elif action != "ok":
    sys.exit(f"unknown action {action!r}")
print("done", flush=True)
