"""OBS through its S3-compatible API with boto3: the client, the bucket check, and one line for every failure.

The client is set up the way OBS needs it: SigV4 (``s3v4``) with checksums only when required (OBS takes
only ``UNSIGNED-PAYLOAD``/streaming payload modes, and boto3 >= 1.36 would add CRC32 trailers), virtual-host
addressing for the real service and path style for an endpoint given as an IP address (or ``localhost``),
connect and read timeouts apart (an unreachable endpoint fails in seconds).

:func:`obs_failure` turns anything boto3 raises (``ClientError``, ``S3UploadFailedError``, connection errors)
into one :class:`~malaunch.sdk.errors.BackendError` line (exit 3) naming the bucket and key and saying what to
do; :func:`check_bucket` asks once, before anything is uploaded, whether the bucket exists and may be used.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from ...errors import BackendError, ConfigError
from .credentials import Credentials, Endpoints, is_ip_endpoint, mask
from .variables import ENV_OBS_ENDPOINT

__all__ = ["check_bucket", "error_code", "make_s3_client", "obs_failure", "parse_obs_url"]

_AUTH_ERRORS = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidSecurity")
_EXPIRED_ERRORS = ("ExpiredToken", "InvalidToken", "TokenRefreshRequired")
_MISSING_BUCKET = ("NoSuchBucket", "404", "NotFound")
_DENIED = ("AccessDenied", "403", "Forbidden", "AllAccessDisabled")
_CODE_IN_TEXT = re.compile(r"\(([A-Za-z]+)\)")


def parse_obs_url(url: str) -> Tuple[str, str]:
    """``obs://bucket/some/prefix/`` -> (``bucket``, ``some/prefix/``)."""
    if not url.startswith("obs://"):
        raise ConfigError("not an OBS URL", url, "use obs://bucket/prefix/")
    bucket, _, key = url[len("obs://") :].partition("/")
    if not bucket:
        raise ConfigError("the OBS URL has no bucket", url, "use obs://bucket/prefix/")
    return bucket, key


def make_s3_client(endpoints: Endpoints, credentials: Credentials, *, workers: int = 16) -> Any:
    """A boto3 S3 client for OBS (see the module docstring)."""
    import boto3
    from botocore.config import Config

    settings: Dict[str, Any] = {
        "signature_version": "s3v4",
        "s3": {"addressing_style": "path" if is_ip_endpoint(endpoints.obs) else "virtual"},
        "retries": {"max_attempts": 5, "mode": "standard"},
        "max_pool_connections": max(10, workers * 2),
        "connect_timeout": 3,
        "read_timeout": 60,
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


def error_code(error: BaseException) -> str:
    """The S3 error code of a boto3 error (``NoSuchBucket``, ``AccessDenied``, ``404`` ...), or ``""``."""
    response = getattr(error, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    match = _CODE_IN_TEXT.search(str(error))  # S3UploadFailedError keeps only the text of the ClientError
    return match.group(1) if match else ""


def _unreachable(error: BaseException) -> bool:
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError

    return isinstance(error, (BotoConnectionError, EndpointConnectionError, ConnectTimeoutError))


def obs_failure(error: BaseException, bucket: str, key: str, credentials: Credentials, endpoint: str) -> BackendError:
    """One line for an OBS failure on ``obs://bucket/key`` (see the module docstring); secrets never shown."""
    where = f"obs://{bucket}/{key}" if key else f"obs://{bucket}"
    code = error_code(error)
    if _unreachable(error):
        return BackendError(
            f"cannot reach OBS at {endpoint} for {where} ({type(error).__name__}); "
            f"check {ENV_OBS_ENDPOINT} or the region, and your network"
        )
    if code in _MISSING_BUCKET:
        return BackendError(
            f"the OBS bucket {bucket!r} does not exist (needed for {where}); create it in the OBS console "
            "or set modelarts.obs_dir to a bucket you own"
        )
    if code in _EXPIRED_ERRORS and credentials.security_token:
        return BackendError(
            f"OBS refused {where}: the temporary credentials from {credentials.source} have expired ({code}); "
            "get a new AK/SK and security token and submit again"
        )
    if code in _AUTH_ERRORS or code in _EXPIRED_ERRORS:
        return BackendError(
            f"OBS refused the credentials from {credentials.source} (key {mask(credentials.ak)}, {code}) for "
            f"{where}; check the AK/SK and that {ENV_OBS_ENDPOINT} is the OBS endpoint of the region"
        )
    if code in _DENIED:
        return BackendError(
            f"OBS denied access to {where} for the credentials from {credentials.source} ({code}); grant them "
            "read and write access to the bucket, or set modelarts.obs_dir to a bucket they may write"
        )
    text = " ".join(str(error).replace(credentials.sk, "***").split())
    if len(text) > 160:
        text = text[:157] + "..."
    return BackendError(f"OBS failed on {where}: {text}; check modelarts.obs_dir, its permissions and the endpoint")


def check_bucket(client: Any, bucket: str, credentials: Credentials, endpoint: str, key: Optional[str] = None) -> None:
    """One ``HEAD`` of the bucket: it exists and these credentials may use it; else :func:`obs_failure`."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        client.head_bucket(Bucket=bucket)
    except (ClientError, BotoCoreError) as exc:
        raise obs_failure(exc, bucket, key or "", credentials, endpoint) from None
