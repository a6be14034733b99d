"""Start-up floor: one fresh interpreter that ``Popen``s N copies of a worker script and waits for them.

``popen_floor.py N SCRIPT`` starts ``python -u SCRIPT`` N times (stdin and output to /dev/null, each in a
session of its own, as the shim starts ranks) and exits 0 when every copy did. The time from launching this
interpreter to the last worker running is what any launcher written in Python costs at least.
"""

import subprocess
import sys

count, script = int(sys.argv[1]), sys.argv[2]
procs = [
    subprocess.Popen(
        [sys.executable, "-u", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    for _ in range(count)
]
sys.exit(1 if any(proc.wait() for proc in procs) else 0)
