"""torchrun's failure summary ("Root Cause (first observed failure):" and "Failures:"), read from its output."""

import re
from typing import List, NamedTuple, Optional

__all__ = [
    "SUMMARY_END",
    "TorchrunRootCause",
    "parse_torchrun_failures",
    "parse_torchrun_root_cause",
    "summary_written",
]

SUMMARY_END = "=" * 20


class TorchrunRootCause(NamedTuple):
    """The "Root Cause (first observed failure)" entry of torchrun's failure summary."""

    rank: int
    local_rank: int
    exitcode: int  # negative: killed by signal -exitcode
    pid: Optional[int]
    host: Optional[str]


_ROOT_CAUSE = "Root Cause (first observed failure):"
# Patterns as text: compiled (and cached by re) on first use, so importing this module before the first rank
# starts costs no regex compilation.
_RANK_FIELD = r"(?m)^\s*rank\s*:\s*(\d+)\s*\(local_rank:\s*(\d+)\)"
_EXIT_FIELD = r"(?m)^\s*exitcode\s*:\s*(-?\d+)(?:\s*\(pid:\s*(\d+)\))?"
_HOST_FIELD = r"(?m)^\s*host\s*:\s*(\S+)"


_ENTRY = r"(?m)^\[\d+\]:\s*$"


def parse_torchrun_failures(text: str) -> List[TorchrunRootCause]:
    """Every entry of torchrun's last failure summary: the root cause first, then the other failures."""
    root = parse_torchrun_root_cause(text)
    if root is None:
        return []
    start = text.rfind("Failures:", 0, text.rfind(_ROOT_CAUSE))
    found = [root]
    if start < 0:
        return found
    block = text[start : text.rfind(_ROOT_CAUSE)]
    for piece in re.split(_ENTRY, block)[1:]:
        rank, code = re.search(_RANK_FIELD, piece), re.search(_EXIT_FIELD, piece)
        if rank is None or code is None:
            continue
        host = re.search(_HOST_FIELD, piece)
        found.append(
            TorchrunRootCause(
                rank=int(rank.group(1)),
                local_rank=int(rank.group(2)),
                exitcode=int(code.group(1)),
                pid=int(code.group(2)) if code.group(2) else None,
                host=host.group(1) if host else None,
            )
        )
    return found


def parse_torchrun_root_cause(text: str) -> Optional[TorchrunRootCause]:
    """Find the last failure summary in torchrun's output; None when there is none or it is incomplete."""
    at = text.rfind(_ROOT_CAUSE)
    if at < 0:
        return None
    block = text[at + len(_ROOT_CAUSE) :]
    end = block.find(SUMMARY_END)
    if end >= 0:
        block = block[:end]
    rank = re.search(_RANK_FIELD, block)
    code = re.search(_EXIT_FIELD, block)
    if rank is None or code is None:
        return None
    host = re.search(_HOST_FIELD, block)
    return TorchrunRootCause(
        rank=int(rank.group(1)),
        local_rank=int(rank.group(2)),
        exitcode=int(code.group(1)),
        pid=int(code.group(2)) if code.group(2) else None,
        host=host.group(1) if host else None,
    )


def summary_written(text: str) -> bool:
    """torchrun printed its whole failure summary: it has nothing more to say."""
    at = text.rfind(_ROOT_CAUSE)
    return at >= 0 and SUMMARY_END in text[at:]
