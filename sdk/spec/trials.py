"""The variables a sweep sets in each of its trials, which a job's own ``env`` may not set.

They belong to the spec, below the sweeps: the loader refuses them in a job file without knowing sweeps, and
:mod:`malaunch.sdk.sweep.spec` sets them in each trial it expands.
"""

from __future__ import annotations

from typing import Mapping

from ..errors import SpecError

__all__ = ["PARAM_PREFIX", "SWEEP_ID_VARIABLE", "TRIAL_INDEX_VARIABLE", "check_trial_variables"]

TRIAL_INDEX_VARIABLE = "MALAUNCH_TRIAL_INDEX"
SWEEP_ID_VARIABLE = "MALAUNCH_SWEEP_ID"
PARAM_PREFIX = "MALAUNCH_PARAM_"


def check_trial_variables(env: Mapping[str, str]) -> None:
    """Refuse the variables a sweep sets for each trial (``MALAUNCH_TRIAL_INDEX``, ``MALAUNCH_SWEEP_ID``,
    ``MALAUNCH_PARAM_*``) in a job's own ``env``: a job file's, or the command line's."""
    for key in env:
        if key in (TRIAL_INDEX_VARIABLE, SWEEP_ID_VARIABLE) or key.startswith(PARAM_PREFIX):
            problem = "is set for each trial by the sweep, not by env"
            raise SpecError(f"env.{key}", problem, env[key], "remove it from env")
