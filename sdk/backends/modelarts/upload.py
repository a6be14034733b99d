"""Upload a job's code to OBS: only what changed since the last upload, found with one manifest read.

Beside the code folder ``obs://bucket/<prefix>/code/`` lies ``code.malaunch-manifest.json``: every uploaded
file's relative path, size and SHA-256. A submit reads it (one GET), uploads the files whose size or hash
differ (all of them the first time, or when the manifest is missing or damaged) and then writes the new
manifest, only after every file is up. An unchanged re-submit therefore costs one HEAD of the bucket and one
GET, however many files there are; its cost grows with what changed. Objects are not listed, checked or
deleted one by one: delete the manifest to force a full upload (e.g. after removing objects by hand).

Small files go up as one ``PUT`` each from a pool of ``workers`` threads; files of
:data:`MULTIPART_THRESHOLD` or more as parallel multipart uploads. The first failure stops what has not started
and becomes one line (:func:`~malaunch.sdk.backends.modelarts.obs.obs_failure`). Every object also carries its
content hash in the metadata (``x-amz-meta-sha256``).
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, TextIO, Tuple

from ...errors import BackendError
from ...units import binary_size_text
from ..codefiles import CodeFile
from .credentials import Credentials
from .obs import obs_failure, parse_obs_url

__all__ = [
    "HASH_METADATA",
    "MANIFEST_SUFFIX",
    "MULTIPART_THRESHOLD",
    "CodeUploader",
    "ProgressBar",
    "UploadResult",
    "manifest_key",
]

MULTIPART_THRESHOLD = 8 * 1024 * 1024
HASH_METADATA = "sha256"
MANIFEST_SUFFIX = ".malaunch-manifest.json"
_FORMAT = 1


def manifest_key(prefix: str) -> str:
    """The manifest's key for code under ``prefix`` (``jobs/x/code/`` -> ``jobs/x/code.malaunch-manifest.json``)."""
    return prefix.rstrip("/") + MANIFEST_SUFFIX


class ProgressBar:
    """Upload progress on a stream: a redrawn bar on a terminal, a single summary line otherwise."""

    def __init__(self, total: int, stream: Optional[TextIO] = None, label: str = "uploading code") -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.label = label
        self._lock = threading.Lock()
        self._tty = bool(stream is not None and getattr(stream, "isatty", lambda: False)())

    def __call__(self, amount: int) -> None:
        with self._lock:
            self.done += amount
            if self._tty and self.stream is not None:
                width = 30
                filled = int(width * min(self.done, self.total) / self.total)
                done = binary_size_text(self.done)
                self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}   ")
                self.stream.flush()

    def finish(self, text: str) -> None:
        """End the bar with a summary line."""
        if self.stream is not None:
            self.stream.write(("\r" if self._tty else "") + text + "\n")
            self.stream.flush()


@dataclass(frozen=True)
class UploadResult:
    """What an upload did: object keys uploaded and skipped (unchanged), bytes sent."""

    uploaded: Tuple[str, ...]
    skipped: Tuple[str, ...]
    bytes_uploaded: int


def _entries(data: Any) -> Dict[str, Tuple[int, str]]:
    """The manifest's files, read defensively: anything malformed counts as no manifest."""
    if not isinstance(data, Mapping) or data.get("format") != _FORMAT or not isinstance(data.get("files"), Mapping):
        return {}
    out: Dict[str, Tuple[int, str]] = {}
    for rel, entry in data["files"].items():
        if isinstance(entry, Mapping) and isinstance(entry.get("size"), int) and isinstance(entry.get("sha256"), str):
            out[str(rel)] = (int(entry["size"]), str(entry["sha256"]))
    return out


class CodeUploader:
    """Uploads selected code files under an ``obs://`` folder, skipping unchanged ones (module docstring)."""

    def __init__(
        self,
        client: Any,
        credentials: Credentials,
        *,
        endpoint: str = "",
        workers: int = 16,
        progress: Optional[TextIO] = None,
    ) -> None:
        self.client = client
        self.credentials = credentials
        self.endpoint = endpoint
        self.workers = workers
        self.progress = progress

    def read_manifest(self, bucket: str, key: str) -> Dict[str, Tuple[int, str]]:
        """The last upload's files (path -> size, sha256); empty when there is no readable manifest."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            raw = self.client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return {}
            raise obs_failure(exc, bucket, key, self.credentials, self.endpoint) from None
        except BotoCoreError as exc:
            raise obs_failure(exc, bucket, key, self.credentials, self.endpoint) from None
        try:
            return _entries(json.loads(raw.decode("utf-8")))
        except (UnicodeDecodeError, ValueError):
            return {}  # damaged: everything goes up again and a good manifest replaces it

    def _put(self, bucket: str, key: str, item: CodeFile, bar: ProgressBar, stop: threading.Event) -> None:
        from boto3.exceptions import Boto3Error
        from boto3.s3.transfer import TransferConfig
        from botocore.exceptions import BotoCoreError, ClientError

        if stop.is_set():
            return
        meta = {HASH_METADATA: item.sha256}
        try:
            if item.size < MULTIPART_THRESHOLD:
                with open(item.path, "rb") as handle:
                    data = handle.read()
                self.client.put_object(Bucket=bucket, Key=key, Body=data, Metadata=meta)
                bar(len(data))
                return
            config = TransferConfig(
                multipart_threshold=MULTIPART_THRESHOLD, multipart_chunksize=MULTIPART_THRESHOLD, max_concurrency=8
            )
            self.client.upload_file(item.path, bucket, key, ExtraArgs={"Metadata": meta}, Config=config, Callback=bar)
        except (ClientError, BotoCoreError, Boto3Error) as exc:
            stop.set()
            raise obs_failure(exc, bucket, key, self.credentials, self.endpoint) from None
        except OSError as exc:  # the file vanished or became unreadable after it was listed and hashed
            stop.set()
            raise BackendError(
                f"code file {item.relpath!r} could not be read for the upload ({exc.strerror or type(exc).__name__}: "
                f"{item.path}); it changed after it was listed, so nothing was submitted and the upload is not "
                "recorded as done: leave the code folder alone while submitting and run the submit again"
            ) from None

    def _write_manifest(self, bucket: str, key: str, files: Sequence[CodeFile]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        data = {"format": _FORMAT, "files": {f.relpath: {"size": f.size, "sha256": f.sha256} for f in files}}
        body = json.dumps(data, separators=(",", ":"), sort_keys=True).encode("utf-8")
        try:
            self.client.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")
        except (ClientError, BotoCoreError) as exc:
            raise obs_failure(exc, bucket, key, self.credentials, self.endpoint) from None

    def _send(self, bucket: str, jobs: Sequence[Tuple[str, CodeFile]], bar: ProgressBar) -> None:
        stop = threading.Event()
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            futures = [pool.submit(self._put, bucket, key, item, bar, stop) for key, item in jobs]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            for future in done:
                error = future.exception()
                if error is not None:
                    stop.set()
                    raise error

    def upload(self, files: Sequence[CodeFile], target: str) -> UploadResult:
        """Upload ``files`` (with hashes) under ``target`` (``obs://bucket/prefix/``) that differ from the manifest."""
        bucket, prefix = parse_obs_url(target)
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        key = manifest_key(prefix)
        known = self.read_manifest(bucket, key)
        changed = [item for item in files if known.get(item.relpath) != (item.size, item.sha256)]
        unchanged = [prefix + item.relpath for item in files if known.get(item.relpath) == (item.size, item.sha256)]
        bar = ProgressBar(sum(item.size for item in changed), self.progress)
        jobs: List[Tuple[str, CodeFile]] = sorted(
            ((prefix + item.relpath, item) for item in changed), key=lambda job: -job[1].size
        )  # big files first: they take longest
        self._send(bucket, jobs, bar)
        if changed or set(known) != {item.relpath for item in files}:
            self._write_manifest(bucket, key, files)
        sent_bytes = sum(item.size for item in changed)
        bar.finish(
            f"code: {len(changed)} file(s) uploaded ({binary_size_text(sent_bytes)}), "
            f"{len(unchanged)} unchanged, to {target}"
        )
        return UploadResult(tuple(prefix + item.relpath for item in changed), tuple(unchanged), sent_bytes)
