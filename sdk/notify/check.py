"""What ``submit`` checks of a job's targets on this machine, each refusal in one line: a command that is not
found, a webhook's secret variable that is not set (the local backend's hosts inherit this environment)."""

from __future__ import annotations

import os
import shutil
from typing import Mapping

from ..errors import SpecError
from ..spec.model import JobSpec

__all__ = ["check_targets_here"]


def check_targets_here(spec: JobSpec, environ: Mapping[str, str]) -> None:
    """Raises :class:`SpecError` for the first target that cannot work from here."""
    for index, target in enumerate(spec.notify):
        if target.command:
            program = target.command[0]
            found = shutil.which(program, path=environ.get("PATH", os.defpath))
            if found is None and not (os.path.isabs(program) and os.access(program, os.X_OK)):
                raise SpecError(f"notify[{index}].command[0]", "is not a program found on PATH", program,
                                "give the full path of the program, or install it")  # fmt: skip
        if target.secret_env is not None and not environ.get(target.secret_env):
            hint = f"export {target.secret_env}=<the webhook's secret> before submitting"
            raise SpecError(f"notify[{index}].secret_env", "names a variable that is not set here",
                            target.secret_env, hint)  # fmt: skip
