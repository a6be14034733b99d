"""The structure of pytorch/examples ``distributed/ddp-tutorial-series/multigpu_torchrun.py``, re-created for
CPU (gloo): ``ddp_setup``, a ``Trainer`` that wraps the model in DDP and runs epochs over a DataLoader with a
``DistributedSampler``, rank 0 saving a snapshot, ``destroy_process_group`` at the end.

Usage: multigpu_torchrun.py TOTAL_EPOCHS SAVE_EVERY [--batch_size N]
Fault probe (not in the original): DDP_FAIL_RANK=R and DDP_FAIL_CODE=C make rank R ``sys.exit(C)`` at the
start of epoch DDP_FAIL_EPOCH (default 1); its peers then fail in their next all-reduce (gloo).
DDP_FAIL_AFTER_PEER=FOLDER (a folder every rank can write) makes that failure the worst case for the shim, in
every run: each rank writes its pid there at the start; rank R shuts its TCP sockets down (its peers fail in gloo,
"Connection closed by peer", as when its interpreter tears down), and exits only once a peer's
process on its own host (any peer's where it has none) has ended (gone, or a zombie not yet reaped), then at once
(``os._exit``). Its own death is then always
seen after a peer's whose log says a peer failed: what a busy machine makes happen only sometimes, an
interpreter outliving its peer's abort.
"""

import argparse
import os
import select
import socket
import sys

import torch
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MyTrainDataset(Dataset):
    def __init__(self, size: int) -> None:
        self.size = size
        self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        return self.data[index]


def ddp_setup() -> None:
    init_process_group(backend="gloo")  # the example uses nccl with torch.cuda.set_device(LOCAL_RANK)
    folder = os.environ.get("DDP_FAIL_AFTER_PEER")
    if folder:
        path = os.path.join(folder, f"pid-{os.environ['RANK']}")
        with open(path + ".tmp", "w") as out:
            out.write(str(os.getpid()))
        os.replace(path + ".tmp", path)


def _shut_tcp_sockets() -> None:
    """Shut down every TCP connection of this process (gloo's pairs among them), leaving the descriptors open: the
    peers read the end of their connection, as when this process's interpreter ends."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue
        try:
            tcp = sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM
            if tcp and not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):  # a connection, not a listener
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            sock.close()


def _peer_pids(folder: str) -> list:
    """The pids of this rank's peers on its own host (torchrun numbers a host's ranks together: RANK //
    LOCAL_WORLD_SIZE is the host), or of every peer where it has none: the death this rank waits for is then one
    its own host's launcher sees too, so that host's record always holds a peer's death before this one."""
    rank, size = int(os.environ["RANK"]), int(os.environ.get("LOCAL_WORLD_SIZE") or 0)
    pids = {}
    for name in os.listdir(folder):
        if name.startswith("pid-") and "." not in name and name != f"pid-{rank}":
            with open(os.path.join(folder, name)) as pid:
                pids[int(name[len("pid-"):])] = int(pid.read())
    local = [pid for peer, pid in pids.items() if size and peer // size == rank // size]
    return local or list(pids.values())


def _exit_after_a_peer(code: int) -> None:
    """Shut the connections down, wait until a peer's process has ended (a pidfd, readable from the moment it
    exits, even before it is reaped), then exit ``code`` at once (DDP_FAIL_AFTER_PEER)."""
    peers = _peer_pids(os.environ["DDP_FAIL_AFTER_PEER"])
    fds = []
    for peer in peers:
        try:
            fds.append(os.pidfd_open(peer))
        except ProcessLookupError:  # already gone
            fds = []
            break
    _shut_tcp_sockets()
    if fds:
        select.select(fds, [], [], 120)
    print(f"[rank {os.environ['RANK']}] a peer died: exiting", flush=True)
    os._exit(code)  # at once: the teardown of a process group whose connections are shut down may hang


class Trainer:
    def __init__(self, model, train_data, optimizer, save_every: int, snapshot_path: str) -> None:
        self.rank = int(os.environ["RANK"])
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every
        self.snapshot_path = snapshot_path
        self.model = DDP(model)

    def _run_batch(self, source, targets) -> None:
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.cross_entropy(output, targets.squeeze().long() % 2)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch: int) -> None:
        size = len(next(iter(self.train_data))[0])
        print(f"[rank {self.rank}] Epoch {epoch} | Batchsize: {size} | Steps: {len(self.train_data)}", flush=True)
        self.train_data.sampler.set_epoch(epoch)
        for source, targets in self.train_data:
            self._run_batch(source, targets)

    def _save_snapshot(self, epoch: int) -> None:
        torch.save({"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}, self.snapshot_path)
        print(f"Epoch {epoch} | Training snapshot saved at {self.snapshot_path}", flush=True)

    def train(self, max_epochs: int) -> None:
        fail_rank = int(os.environ.get("DDP_FAIL_RANK", "-1"))
        fail_epoch = int(os.environ.get("DDP_FAIL_EPOCH", "1"))
        for epoch in range(max_epochs):
            if self.rank == fail_rank and epoch == fail_epoch:
                print(f"[rank {self.rank}] failing on purpose at epoch {epoch}", flush=True)
                code = int(os.environ.get("DDP_FAIL_CODE", "1"))
                if os.environ.get("DDP_FAIL_AFTER_PEER"):
                    _exit_after_a_peer(code)
                sys.exit(code)
            self._run_epoch(epoch)
            if self.rank == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def load_train_objs():
    train_set = MyTrainDataset(256)
    model = torch.nn.Linear(20, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    return train_set, model, optimizer


def prepare_dataloader(dataset: Dataset, batch_size: int) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, pin_memory=False, shuffle=False,
                      sampler=DistributedSampler(dataset))


def main(save_every: int, total_epochs: int, batch_size: int, snapshot_path: str = "snapshot.pt") -> None:
    ddp_setup()
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size)
    trainer = Trainer(model, train_data, optimizer, save_every, snapshot_path)
    trainer.train(total_epochs)
    destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("total_epochs", type=int, help="Total epochs to train the model")
    parser.add_argument("save_every", type=int, help="How often to save a snapshot")
    parser.add_argument("--batch_size", default=32, type=int, help="Input batch size on each device (default: 32)")
    args = parser.parse_args()
    main(args.save_every, args.total_epochs, args.batch_size)
