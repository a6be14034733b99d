"""Upload a job's code to OBS through its S3-compatible API with boto3.

The client is set up the way OBS needs it: SigV4 (``s3v4``) with checksums only when required (OBS takes
only ``UNSIGNED-PAYLOAD``/streaming payload modes, and boto3 >= 1.36 would add CRC32 trailers), virtual-host
addressing for the real service and path style for an endpoint given as an IP address (or ``localhost``).
Files bigger than :data:`MULTIPART_THRESHOLD` go up as parallel multipart uploads; several files upload at
once. Every object carries its content hash in the metadata (``x-amz-meta-sha256``), and a file whose object
already has the same hash and size is skipped, so re-submitting unchanged code uploads nothing.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, TextIO, Tuple

from ...errors import BackendError, ConfigError
from ..codefiles import CodeFile
from .credentials import Credentials, Endpoints, is_ip_endpoint, mask

__all__ = [
    "HASH_METADATA",
    "MULTIPART_THRESHOLD",
    "CodeUploader",
    "ProgressBar",
    "UploadResult",
    "make_s3_client",
    "parse_obs_url",
]

MULTIPART_THRESHOLD = 8 * 1024 * 1024
HASH_METADATA = "sha256"
_AUTH_ERRORS = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken")


def parse_obs_url(url: str) -> Tuple[str, str]:
    """``obs://bucket/some/prefix/`` -> (``bucket``, ``some/prefix/``)."""
    if not url.startswith("obs://"):
        raise ConfigError("not an OBS URL", url, "use obs://bucket/prefix/")
    bucket, _, key = url[len("obs://") :].partition("/")
    if not bucket:
        raise ConfigError("the OBS URL has no bucket", url, "use obs://bucket/prefix/")
    return bucket, key


def make_s3_client(endpoints: Endpoints, credentials: Credentials, *, workers: int = 8) -> Any:
    """A boto3 S3 client for OBS (see the module docstring)."""
    import boto3
    from botocore.config import Config

    settings: Dict[str, Any] = {
        "signature_version": "s3v4",
        "s3": {"addressing_style": "path" if is_ip_endpoint(endpoints.obs) else "virtual"},
        "retries": {"max_attempts": 5, "mode": "standard"},
        "max_pool_connections": max(10, workers * 2),
    }
    checksums = {"request_checksum_calculation": "when_required", "response_checksum_validation": "when_required"}
    try:
        config = Config(**settings, **checksums)
    except TypeError:  # botocore < 1.36 knows no such settings and sends no checksum trailers anyway
        config = Config(**settings)
    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoints.obs,
        region_name=credentials.region,
        aws_access_key_id=credentials.ak,
        aws_secret_access_key=credentials.sk,
        aws_session_token=credentials.security_token,
        config=config,
    )


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
                mib = self.done / 1048576
                self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {mib:.1f} MiB")
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


class CodeUploader:
    """Uploads selected code files under an ``obs://`` folder, skipping unchanged ones."""

    def __init__(self, client: Any, credentials: Credentials, *, workers: int = 8, progress: Optional[TextIO] = None):
        self.client = client
        self.credentials = credentials
        self.workers = workers
        self.progress = progress

    def _fail(self, error: Exception, key: str) -> Exception:
        code = ""
        response = getattr(error, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
        if code in _AUTH_ERRORS:
            return ConfigError(
                f"OBS refused the credentials from {self.credentials.source} ({code}) for {key}",
                mask(self.credentials.ak),
                "check the access key, secret key and the bucket's permissions",
            )
        text = str(error).replace(self.credentials.sk, "***")[:200]
        return BackendError(f"uploading {key} to OBS failed: {text}; check modelarts.obs_dir and the endpoint")

    def _unchanged(self, bucket: str, key: str, item: CodeFile) -> bool:
        from botocore.exceptions import ClientError

        try:
            head = self.client.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if str(exc.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        meta = head.get("Metadata") or {}
        return bool(meta.get(HASH_METADATA) == item.sha256 and head.get("ContentLength") == item.size)

    def _one(self, bucket: str, key: str, item: CodeFile, bar: ProgressBar) -> bool:
        from boto3.s3.transfer import TransferConfig
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            if self._unchanged(bucket, key, item):
                return False
            config = TransferConfig(
                multipart_threshold=MULTIPART_THRESHOLD,
                multipart_chunksize=MULTIPART_THRESHOLD,
                max_concurrency=self.workers,
            )
            self.client.upload_file(
                item.path,
                bucket,
                key,
                ExtraArgs={"Metadata": {HASH_METADATA: item.sha256}},
                Config=config,
                Callback=bar,
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._fail(exc, key) from None
        return True

    def upload(self, files: Sequence[CodeFile], target: str) -> UploadResult:
        """Upload ``files`` (with hashes) under ``target`` (``obs://bucket/prefix/``)."""
        bucket, prefix = parse_obs_url(target)
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        bar = ProgressBar(sum(item.size for item in files), self.progress)
        keys = [prefix + item.relpath for item in files]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            done = list(pool.map(lambda pair: self._one(bucket, pair[0], pair[1], bar), zip(keys, files)))
        uploaded: List[str] = [key for key, sent in zip(keys, done) if sent]
        skipped = [key for key, sent in zip(keys, done) if not sent]
        sent_bytes = sum(item.size for item, sent in zip(files, done) if sent)
        bar.finish(
            f"code: {len(uploaded)} file(s) uploaded ({sent_bytes / 1048576:.1f} MiB), "
            f"{len(skipped)} unchanged, to {target}"
        )
        return UploadResult(tuple(uploaded), tuple(skipped), sent_bytes)
