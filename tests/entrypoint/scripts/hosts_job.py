"""A rank of the coordinator tests: what it does depends on its host and the job's attempt.

``HOSTS_JOB_PLAN`` holds ``attempt:host=action`` items (comma-separated); the default action is ``ok``:
- ``ok``: exit 0 at once; ``exit7``: exit 7; ``kill``: SIGKILL itself after 0.5 s;
- ``sleep``: compute (sleep) for 600 s, outside any collective.
Each start leaves ``started-h<host>-a<attempt>`` in ``HOSTS_JOB_DIR`` so the test can wait for it.
"""

import os
import signal
import sys
import time

attempt = int(os.environ.get("MALAUNCH_ATTEMPT", "0"))
host = int(os.environ.get("VC_TASK_INDEX", "0"))
plan = dict(item.split("=", 1) for item in os.environ.get("HOSTS_JOB_PLAN", "").split(",") if "=" in item)
action = plan.get(f"{attempt}:{host}", "ok")
folder = os.environ["HOSTS_JOB_DIR"]
open(os.path.join(folder, f"started-h{host}-a{attempt}"), "w").close()
print(f"host {host} attempt {attempt}: {action}; secret seen: {'MALAUNCH_JOB_SECRET' in os.environ}", flush=True)
if action == "kill":
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
elif action == "sleep":
    time.sleep(600)
elif action.startswith("exit"):
    sys.exit(int(action[4:]))
print("done", flush=True)
