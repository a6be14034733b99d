"""How the conformance suite drives the toy backend: a backend on a home of the test's, the toy's scenario words,
old jobs seeded as records, and ``ma-submit`` with the toy's line (:mod:`toy.cli`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

from .backend import ToyBackend
from .cli import toy_ma_submit

__all__ = ["make_target"]


def make_target(target: Callable[..., Any], tmp_path: Path, cli_env: Dict[str, str], home: Path) -> Iterator[Any]:
    """The suite's ``Target`` for the toy (``target`` is its type)."""
    backend = ToyBackend(home=str(home), environ=cli_env)
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('a toy job runs nothing')\n")

    def seed(count: int) -> List[str]:
        ids = []
        for n in range(count):
            job_id = f"toy-seeded-{n:03d}"
            backend.record({
                "id": job_id, "name": "seeded", "created_at": 1_700_000_000.0 + n, "hosts": 2, "steps": 2,
                "state": "SUCCEEDED", "exit_code": 0, "ended_at": 1_700_000_000.5 + n,
            })  # fmt: skip
            ids.append(job_id)
        return ids

    yield target(
        "toy", backend, cli_env, code, {"succeed": "0", "fail7": "7", "run": "run"}, {"toy": {"steps": 3}},
        ["toy-conf-20260101-000000-abcdef"], seed, cli=toy_ma_submit,
    )  # fmt: skip
