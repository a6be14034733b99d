"""``launcher.hang_timeout`` (issue 26): validated with the shim's bounds, written as ``MALAUNCH_HANG_TIMEOUT`` by
all three backends, left unset (off) when the job file does not set it; a job's ``env`` may not set it. Pure."""

from __future__ import annotations

import pytest
from fieldenv import BASE, written
from malaunch.entrypoint import contract
from malaunch.sdk import SpecError, spec_from_mapping
from malaunch.sdk.spec.model import LauncherOptions

NAME = "MALAUNCH_HANG_TIMEOUT"




def test_the_field_takes_the_shims_bounds() -> None:
    row = contract.VARIABLES[NAME]
    assert row.sdk_field == "launcher.hang_timeout" and row.default == 0.0
    assert row.minimum is not None and row.maximum is not None
    for good in (row.minimum, 2.5, row.maximum):
        assert LauncherOptions(hang_timeout=good).hang_timeout == good
    for bad in (row.minimum - 1, row.maximum + 1, float("nan"), True, "soon"):
        with pytest.raises(SpecError, match=r"launcher\.hang_timeout"):
            LauncherOptions(hang_timeout=bad)


@pytest.mark.parametrize("method", ["torchrun", "ranktable", "msrun"])
def test_every_backend_writes_it(method: str) -> None:
    spec = spec_from_mapping({**BASE, "run_method": method, "launcher": {"hang_timeout": 300}})
    for where, env in written(spec, (NAME,)).items():
        assert env == {NAME: "300"}, where


def test_unset_it_is_off_everywhere() -> None:
    spec = spec_from_mapping({**BASE, "run_method": "torchrun"})
    for where, env in written(spec, (NAME,)).items():
        assert env == {}, where


def test_env_may_not_set_it_and_names_the_field() -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_mapping({**BASE, "env": {NAME: "30"}})
    assert "launcher.hang_timeout" in str(caught.value)
