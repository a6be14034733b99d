"""One rank really fails and every other rank dies because of it, before it is gone (gloo's way).

  peer_deaths.py DIR CULPRIT WORLD
Every other rank holds a connection to rank CULPRIT (a unix socket in DIR, as gloo holds TCP pairs). Each rank
writes DIR/ready-<rank> and waits for DIR/go (a wall-clock time T). At T the culprit closes its connections and
takes 2 s to exit 7 (an interpreter tearing down). Each other rank sees its connection close, prints gloo's
"Connection closed by peer" error and "terminate called without an active exception", and aborts, 30 ms apart
in rank order: every one of them dies before the culprit.
"""

import os
import resource
import socket
import sys
import time

GLOO = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
    "[127.0.0.1]:29771. This is typically caused by a remote worker crashing"
)

folder, culprit, world = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rank = int(os.environ.get("RANK_ID") or os.environ.get("RANK") or "0")
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # an abort without a core file
path = os.path.join(folder, "sock")
links = []
if rank == culprit:
    server = socket.socket(socket.AF_UNIX)
    server.bind(path + ".tmp")
    server.listen(world)
    os.rename(path + ".tmp", path)
    links = [server.accept()[0].detach() for _ in range(world - 1)]  # raw fds
else:
    client = socket.socket(socket.AF_UNIX)
    while True:
        try:
            client.connect(path)
            break
        except OSError:
            time.sleep(0.01)
    links = [client.detach()]
open(os.path.join(folder, f"ready-{rank}"), "w").close()
go = os.path.join(folder, "go")
while not os.path.exists(go):
    time.sleep(0.005)
with open(go) as handle:
    at = float(handle.read())
if rank == culprit:
    time.sleep(max(0.0, at - time.time()))
    print(f"rank {rank} failing on purpose", flush=True)
    for link in links:
        os.close(link)
    time.sleep(2.0)
    sys.exit(7)
while os.read(links[0], 1):  # EOF: the culprit closed it
    pass
time.sleep(0.03 * (1 + rank))
print(GLOO, file=sys.stderr, flush=True)
print("terminate called without an active exception", file=sys.stderr, flush=True)
os.abort()
