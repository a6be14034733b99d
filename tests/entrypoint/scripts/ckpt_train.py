"""A small deterministic CPU training that checkpoints through malaunch.entrypoint.checkpoint (issue 39's proof).

Usage: ckpt_train.py OUT TOTAL EVERY FAULT [PAUSE]

Every rank trains a replica of one linear model with SGD and momentum (fixed seed; the batch of step s is chosen by
s and the rank; gradients averaged with gloo's all_reduce every step), and saves ``rank-<R>.pt`` every EVERY steps
with ``checkpoint.save``; it resumes from ``checkpoint.resume_from()``. FAULT (first attempt only):
``none``, ``run:RANK:STEP`` (RANK kills itself with SIGKILL after step STEP), ``save:RANK:STEP`` (RANK kills itself
in the middle of the save of step STEP, a half-written file left behind), ``wipe:RANK:STEP`` (after step STEP,
RANK removes the folder of the newest save, complete, from the checkpoint folder, then kills itself with SIGKILL:
the checkpoint the job's hosts agreed on is gone before the next attempt). PAUSE (seconds, default 0) follows
each step, for a run long enough to be interrupted from outside. Each trained step is appended to
``OUT/trained-<R>.jsonl`` with the attempt and the world size; at the end rank 0 writes the weights' bytes (hex)
to ``OUT/final.json``. With ``CKPT_TRAIN_FORMAT=dcp`` in the environment the checkpoint is torch's distributed
checkpoint (every rank saves into the one folder; ``rank-<R>.pt`` otherwise).
"""

import json
import os
import shutil
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from malaunch.entrypoint import checkpoint
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

out, total, every, fault = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
attempt = int(os.environ.get("MALAUNCH_ATTEMPT", "0"))
dist.init_process_group("gloo")
rank, size = dist.get_rank(), dist.get_world_size()
parts = fault.split(":") if fault != "none" else ["none", "-1", "-1"]
kind, fault_rank, fault_step = parts[0], int(parts[1]), int(parts[2])
faulty = attempt == 0 and rank == fault_rank

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
start = 0
resume = checkpoint.resume_from()
print(f"rank {rank} attempt {attempt} MALAUNCH_RESUME_FROM={os.environ.get('MALAUNCH_RESUME_FROM')}", flush=True)
use_dcp = os.environ.get("CKPT_TRAIN_FORMAT") == "dcp"
if resume and use_dcp:
    model_state, opt_state = get_state_dict(model, opt)
    state = {"model": model_state, "opt": opt_state, "step": torch.tensor(0)}
    dcp.load(state, checkpoint_id=resume)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["opt"])
    start = int(state["step"])
elif resume:
    state = torch.load(os.path.join(resume, f"rank-{rank}.pt"))
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = state["step"]

for step in range(start + 1, total + 1):
    gen = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(16, 8, generator=gen)
    y = x.sum(dim=1, keepdim=True) * 0.5
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    for param in model.parameters():
        dist.all_reduce(param.grad)
        param.grad /= size
    opt.step()
    with open(os.path.join(out, f"trained-{rank}.jsonl"), "a") as log:
        log.write(json.dumps({"step": step, "attempt": attempt, "world": size}) + "\n")
    if faulty and kind == "run" and step == fault_step:
        os.kill(os.getpid(), signal.SIGKILL)
    if faulty and kind == "wipe" and step == fault_step:
        shutil.rmtree(os.path.join(os.environ["MALAUNCH_CHECKPOINT_DIR"], f"step-{step - step % every:08d}"))
        os.kill(os.getpid(), signal.SIGKILL)
    checkpoint.progress(step, total)
    if step % every == 0:
        with checkpoint.save(step) as folder:
            path = os.path.join(folder, f"rank-{rank}.pt")
            if faulty and kind == "save" and step == fault_step:
                with open(path, "wb") as half:
                    half.write(b"half a checkpoint")
                os.kill(os.getpid(), signal.SIGKILL)
            if use_dcp:  # every rank writes its shards into the one folder, rank 0 the metadata too
                model_state, opt_state = get_state_dict(model, opt)
                dcp.save({"model": model_state, "opt": opt_state, "step": torch.tensor(step)}, checkpoint_id=folder)
            else:
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, path)
    time.sleep(pause)

if rank == 0:
    weights = {name: value.detach().numpy().tobytes().hex() for name, value in model.state_dict().items()}
    with open(os.path.join(out, "final.json"), "w") as final:
        json.dump(weights, final)
dist.destroy_process_group()
