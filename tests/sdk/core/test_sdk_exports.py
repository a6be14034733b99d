"""The public surface of malaunch.sdk is explicit: ``__all__`` is sorted, complete and importable."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import malaunch.sdk

EXPECTED = [
    "Backend", "BackendError", "BackendNotAvailable", "ConfigError", "DataSpec", "ExecElsewhere", "ExecResult",
    "HostState", "HostStatus", "HostUsage", "Job", "JobEvent", "JobHandle", "JobNotFound", "JobNotRunning", "JobSpec",
    "JobState", "JobStatus", "LauncherOptions", "MalaunchError", "Resources", "SpecError", "SubmitPlan", "Sweep",
    "SweepHandle", "SweepNotFound", "UsageReport", "WaitTimeout", "attach", "attach_sweep", "available_backends",
    "get_backend", "load_job_file", "spec_from_mapping",
]  # fmt: skip


def test_all_is_explicit_and_sorted() -> None:
    assert malaunch.sdk.__all__ == EXPECTED
    assert sorted(malaunch.sdk.__all__) == malaunch.sdk.__all__


def test_every_name_exists() -> None:
    for name in malaunch.sdk.__all__:
        assert getattr(malaunch.sdk, name) is not None


def test_public_names_are_not_private_modules() -> None:
    public = {name for name in dir(malaunch.sdk) if not name.startswith("_")}
    modules = {info.name for info in pkgutil.iter_modules(malaunch.sdk.__path__)}
    assert public - set(malaunch.sdk.__all__) <= modules | {"annotations"}


def test_every_module_has_all_and_docstring() -> None:
    names = ["malaunch.sdk"] + [
        info.name for info in pkgutil.walk_packages(malaunch.sdk.__path__, prefix="malaunch.sdk.")
    ]
    for name in names:
        module = importlib.import_module(name)
        assert module.__doc__, f"{name} has no docstring"
        assert isinstance(getattr(module, "__all__", None), list), f"{name} has no __all__"
        for exported in module.__all__:
            assert hasattr(module, exported), f"{name}.__all__ lists missing {exported}"


def test_the_roots_lazy_names_are_all_and_each_resolves_from_its_home() -> None:
    """The SDK's root is the public API's one lazy facade (docs/sdk.md#architecture): its names are ``__all__``,
    each is the object its home module defines, and ``dir()`` lists exactly them."""
    homes = malaunch.sdk._HOMES
    assert sorted(homes) == malaunch.sdk.__all__
    assert dir(malaunch.sdk) == malaunch.sdk.__all__
    for name, home in homes.items():
        assert getattr(malaunch.sdk, name) is getattr(importlib.import_module(f"malaunch.sdk.{home}"), name), name


def test_importing_the_root_loads_none_of_its_homes() -> None:
    """What the facade buys: ``ma-submit`` imports ``malaunch.sdk.cli``, which runs the root first; the root loads no
    module of the SDK, so no verb pays for the loader, YAML, the spec or sweeps it does not use."""
    probe = "import sys, malaunch.sdk; print(sorted(m for m in sys.modules if m.startswith('malaunch.sdk.')))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
