"""torchrun: PyTorch's ``python -m torch.distributed.run`` per host, which starts this host's workers.

Planning (the argv, the attempts' counters, elastic membership) is :mod:`.plan` (:class:`~.plan.TorchrunPlanner`);
running (following the workers' files, torchrun's summary and error files, the gate of its own restarts) is
:mod:`.launcher` (:class:`~.launcher.TorchrunLauncher`), so that a dry run plans without the run's modules.
"""

__all__: list[str] = []
