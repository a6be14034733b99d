"""The checkpoints of an OBS folder (a ModelArts job's checkpoint output), listed as the shim lists a folder on disk.

:func:`list_obs_checkpoints` lists every object under the folder's prefix once (boto3's ``list_objects_v2``, page by
page), groups them by their first path part under it (one checkpoint each; parts starting with ``.`` are not
checkpoints), reads each checkpoint's ``.complete`` (its first 64 KiB) and its ``.parts`` records, and hands them to
the shim's own :func:`~malaunch.entrypoint.public.checkpoint_rows`, so a checkpoint is complete, damaged or
unfinished on OBS exactly when it would be on disk. Every node uploads its own folder there, so a ``.complete``
may arrive before another node's files: a checkpoint with ``.parts`` whose marker records ``ranks`` counts as
complete only when ``.parts/rank-<R>`` of each of them is there too (else ``parts missing``, naming them). A
checkpoint's size is the sum of its objects, its time the newest ``LastModified`` of them (used only where its
marker records none).

:func:`obs_listing` is ``ma-submit checkpoints`` of a ModelArts job: the OBS folder its details name
(:func:`.checkpoint.checkpoint_url_of`), listed with the backend's own OBS client; an OBS failure is its one line
(:func:`.obs.obs_failure`).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from botocore.exceptions import BotoCoreError, ClientError
from malaunch.entrypoint.public import CheckpointRow, checkpoint_rows, found_of

from ..checkpoints import CheckpointListing
from .checkpoint import checkpoint_url_of
from .jobcode import JobCode
from .obs import obs_failure, parse_obs_url
from .phases import status_from_job

__all__ = ["list_obs_checkpoints", "obs_listing"]

_MARKER = ".complete"
_PARTS = ".parts/"
_MAX_MARKER = 65536  # bytes read of a marker, as the shim reads one
_MAX_RECORD = 4096  # bytes read of a part's record, as the shim reads one


class _Group:
    """The objects of one checkpoint under the folder."""

    def __init__(self) -> None:
        self.size = 0
        self.touched = 0.0
        self.marker = False
        self.parts: List[str] = []
        self.holders: Set[int] = set()  # the ranks whose part (.parts/rank-<R>) is there


def _read(client: Any, bucket: str, key: str, limit: int) -> Optional[bytes]:
    """The first ``limit`` bytes of object ``key`` (None: it went away or cannot be read, as a file that vanished)."""
    try:
        body = client.get_object(Bucket=bucket, Key=key, Range=f"bytes=0-{limit - 1}")["Body"]
        data: bytes = body.read()
        return data
    except (BotoCoreError, ClientError):  # read defensively, as the shim reads a folder: it counts nothing
        return None


def _record(data: Optional[bytes]) -> Optional[Mapping[str, object]]:
    if data is None:
        return None
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _groups(client: Any, bucket: str, prefix: str) -> Dict[str, _Group]:
    groups: Dict[str, _Group] = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", ()):
            name, _, rest = str(item["Key"])[len(prefix) :].partition("/")
            if not name or name.startswith(".") or not rest:
                continue
            group = groups.setdefault(name, _Group())
            group.size += int(item.get("Size", 0))
            group.touched = max(group.touched, item["LastModified"].timestamp())
            if rest == _MARKER:
                group.marker = True
            elif rest.startswith(_PARTS) and rest != _PARTS:
                group.parts.append(str(item["Key"]))
                rank = rest[len(_PARTS) :].removeprefix("rank-")
                if rest[len(_PARTS) :].startswith("rank-") and rank.isdigit():
                    group.holders.add(int(rank))
    return groups


def list_obs_checkpoints(client: Any, url: str, *, running: bool = False) -> Tuple[CheckpointRow, ...]:
    """The checkpoints under the OBS folder ``url`` (``obs://bucket/prefix/``), oldest first; ``client``: a boto3
    S3 client of the OBS endpoint. A folder with nothing in it lists nothing. OBS errors are the caller's to say."""
    bucket, key = parse_obs_url(url)
    prefix = key.rstrip("/") + "/" if key.strip("/") else ""
    found = []
    sizes: Dict[str, int] = {}
    for name, group in sorted(_groups(client, bucket, prefix).items()):
        path = f"obs://{bucket}/{prefix}{name}"
        marker = _read(client, bucket, f"{prefix}{name}/{_MARKER}", _MAX_MARKER) if group.marker else None
        records = [_record(_read(client, bucket, part, _MAX_RECORD)) for part in group.parts] if not marker else []
        found.append(found_of(name, path, marker, [record for record in records if record is not None], group.touched,
                              group.holders if group.parts else None))  # fmt: skip
        sizes[path] = group.size
    return tuple(checkpoint_rows(found, sizes, running=running))


def obs_listing(job: Mapping[str, Any], job_id: str, obs: JobCode) -> CheckpointListing:
    """The checkpoints of ModelArts job ``job_id`` (``job``: its details as the API gives them) in the OBS folder
    they were uploaded to, read with ``obs``'s client; a note when it has none.

    Raises:
        BackendError: OBS refused or could not be reached (one line, no secret).
    """
    url = checkpoint_url_of(job)
    running = not status_from_job(job).is_terminal
    if url is None:
        return CheckpointListing(job_id, "", running, (), f"job {job_id} has no checkpoint folder: its job file has no "
                                 "checkpoint: section (add one, and save with malaunch.entrypoint.checkpoint; "
                                 "docs/recovery.md#checkpoints)")  # fmt: skip
    try:
        rows = list_obs_checkpoints(obs.s3_client(), url, running=running)
    except (BotoCoreError, ClientError) as error:
        bucket, key = parse_obs_url(url)
        raise obs_failure(error, bucket, key, obs.credentials(), obs.endpoints.obs) from None
    note = "" if rows else f"job {job_id} saved no checkpoint in {url}" + (" yet" if running else "")
    return CheckpointListing(job_id, url, running, rows, note)
