"""A rank whose output mixes stderr warnings and stdout lines, as a training script's first steps do.

Every rank waits at a file barrier (``ready-<rank>`` in ``CONSOLE_MIX_DIR``, until the world's are all there), so
that all of them start writing at the same moment. Then, for ``CONSOLE_MIX_ROUNDS`` rounds: a real
``warnings.warn_explicit`` (two lines in one write to stderr: the warning and its source line) and, right
after it, stdout lines of varying length. ``CONSOLE_MIX_BUFFERED=1`` writes stdout through an 8 KiB buffer
(a flush cuts lines anywhere, as a script without ``PYTHONUNBUFFERED`` writing to a file does), ``odd`` does so
on the odd ranks only; otherwise every stdout line is its own write.

Every line the rank writes carries ``@<rank>@``, the rank the script sees (``RANK``; ``MS_NODE_ID`` under
msrun), so a test can tell from a console line's content which rank wrote it; a stdout line is padded with it
too, so that even a piece of a line (a partial line the console showed before its end came) names its rank
unless it is only a few bytes or lies in the line's head.
"""

import io
import linecache
import os
import sys
import time
import warnings

if os.environ.get("MS_ROLE") == "MS_SCHED":  # msrun's scheduler runs the script too: it has no rank
    sys.exit(0)
rank = int(os.environ.get("RANK") or os.environ.get("MS_NODE_ID") or os.environ.get("RANK_ID") or "0")
world = int(os.environ.get("WORLD_SIZE") or os.environ.get("MS_WORKER_NUM") or os.environ.get("RANK_SIZE") or "1")
folder = os.environ["CONSOLE_MIX_DIR"]
rounds = int(os.environ.get("CONSOLE_MIX_ROUNDS", "20"))
mode = os.environ.get("CONSOLE_MIX_BUFFERED", "0")
buffered = mode == "1" or (mode == "odd" and rank % 2 == 1)
attempt = os.environ.get("MALAUNCH_ATTEMPT", "0")
tag = f"@{rank}@"

# The warning's "source line" (the second line of its text) names the rank too.
source = f"mix-{rank}.py"
linecache.cache[source] = (0, None, [f"step_of_rank({tag})\n"], source)

if buffered:
    out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False), buffer_size=8192), encoding="utf-8")
else:
    out = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)

with open(os.path.join(folder, f"ready-{attempt}-{rank}"), "w"):
    pass
deadline = time.monotonic() + 120
while sum(os.path.exists(os.path.join(folder, f"ready-{attempt}-{r}")) for r in range(world)) < world:
    if time.monotonic() > deadline:
        sys.exit(f"{tag} the barrier of {world} ranks never filled")
    time.sleep(0.002)

for step in range(rounds):
    warnings.warn_explicit(f"{tag} warning {step}", UserWarning, source, 1)
    for line in range(1 + step % 4):
        out.write(f"{tag} Epoch {step} | line {line} | " + tag * (2 * step + 5 * line) + "\n")
out.write(f"{tag} done\n")
out.flush()
