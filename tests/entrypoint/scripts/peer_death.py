"""Two ranks (or WORLD) that die 20 ms apart, the others because of one, at a time the test chooses.

  peer_death.py DIR CASE FIRST [WORLD]
The ranks hold connections (unix sockets, as gloo holds TCP pairs): rank 0 one to each other rank. Each rank
writes DIR/ready-<rank> and waits for DIR/go (a wall-clock time T); rank FIRST dies at T; every other rank,
like a gloo peer, waits until a connection of its own closes (the kernel closes it as the process at its other
end ends: FIRST, or rank 0 after it), then dies 20 ms later. WORLD (default 2) ranks. CASE:
  exit       FIRST exits 7; the other prints gloo's "Connection closed by peer" error and aborts (SIGABRT)
  abort      FIRST prints "terminate called after throwing ..." and aborts; the other prints the gloo error, exits 1
  terminate  FIRST exits 5; the other prints "terminate called without an active exception" and aborts
  slow       FIRST closes the connection at T and exits 7 two seconds later (an interpreter still tearing down);
             the other prints the gloo error and "terminate called without an active exception" and aborts, so
             it dies first
  slow-term  as slow, but rank 1 (unless it is FIRST) dies of a SIGTERM once its connection closes, silently: the
             stop torchrun's own monitor sends a failed worker's siblings when its tick sees the failure before
             the shim paused torchrun
"""

import os
import resource
import select
import signal
import socket
import sys
import time

GLOO = (
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
    "[127.0.0.1]:29771. This is typically caused by a remote worker crashing"
)

if os.environ.get("MS_ROLE") == "MS_SCHED":  # msrun's scheduler runs the script too: it is no rank
    sys.exit(0)
folder, case, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
world = int(sys.argv[4]) if len(sys.argv) > 4 else 2
rank = int(os.environ.get("MS_NODE_ID") or os.environ.get("RANK_ID") or os.environ.get("RANK") or "0")
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # an abort without a core file
path = os.path.join(folder, "sock")
if rank == 0:
    server = socket.socket(socket.AF_UNIX)
    server.bind(path + ".tmp")
    server.listen(world)
    os.rename(path + ".tmp", path)
    links = [server.accept()[0].detach() for _ in range(world - 1)]  # raw fds: only the process's end closes them
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
if rank == first:
    time.sleep(max(0.0, at - time.time()))
    if case == "abort":
        print("terminate called after throwing an instance of 'std::runtime_error'", file=sys.stderr, flush=True)
        os.abort()
    print(f"rank {rank} failing on purpose", flush=True)
    if case in ("slow", "slow-term"):
        for link in links:
            os.close(link)
        time.sleep(2.0)
    sys.exit(5 if case == "terminate" else 7)
while all(os.read(link, 1) for link in select.select(links, [], [])[0]):  # EOF: a peer's process ended
    pass
time.sleep(0.02)
if case == "slow-term" and rank == 1:
    os.kill(os.getpid(), signal.SIGTERM)  # Python's default for SIGTERM: the process dies of it
if case == "terminate":
    print("terminate called without an active exception", file=sys.stderr, flush=True)
    os.abort()
print(GLOO, file=sys.stderr, flush=True)
if case in ("slow", "slow-term"):
    print("terminate called without an active exception", file=sys.stderr, flush=True)
if case in ("exit", "slow", "slow-term"):
    os.abort()
sys.exit(1)
