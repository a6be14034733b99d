"""The code a ModelArts job takes: checked here (the boot file is there and not ignored), then the credentials and
every bucket, then uploaded to OBS (:class:`~.upload.CodeUploader`), so a wrong key or a missing bucket fails before
one byte is sent. A sweep uploads once for all its trials (:meth:`ModelArtsBackend.share_code`).
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, Optional, TextIO, Tuple

from ...errors import SpecError
from ...spec.model import JobSpec
from ..base import check_boot_file
from ..codefiles import CodeFile, select_code_files
from .api import ModelArtsClient
from .credentials import Credentials, Endpoints
from .obs import check_bucket, make_s3_client, parse_obs_url
from .request import CreateRequest
from .upload import CodeUploader

__all__ = ["JobCode"]


class JobCode:
    """Uploads a job's code with ``credentials()`` through ``api()`` (its credential check) and OBS at
    ``endpoints`` (``s3``: a client to use, else one is made on first use); ``progress``: where uploads report."""

    def __init__(self, credentials: Callable[[], Credentials], api: Callable[[], ModelArtsClient],
                 endpoints: Endpoints, s3: Any, progress: Optional[TextIO]) -> None:  # fmt: skip
        self._credentials = credentials
        self._api = api
        self.endpoints = endpoints
        self._s3 = s3
        self.progress = progress

    def credentials(self) -> Credentials:
        """The credentials OBS is asked with (for the one line of an OBS failure: :func:`.obs.obs_failure`)."""
        return self._credentials()

    def s3_client(self) -> Any:
        """The OBS (S3) client, made on first use."""
        if self._s3 is None:
            self._s3 = make_s3_client(self.endpoints, self._credentials())
        return self._s3

    def _uploader(self) -> CodeUploader:
        return CodeUploader(self.s3_client(), self._credentials(), endpoint=self.endpoints.obs, progress=self.progress)

    def _files(self, spec: JobSpec, request: CreateRequest) -> List[Tuple[List[CodeFile], str]]:
        """The files of every planned upload, checked locally (no network)."""
        out = []
        for upload in request.uploads:
            check_boot_file(os.path.join(upload.source, os.path.normpath(spec.boot_file)), spec.boot_file)
            files = select_code_files(upload.source)
            boot_rel = os.path.normpath(spec.boot_file).replace(os.sep, "/")
            if boot_rel not in {item.relpath for item in files}:
                raise SpecError(
                    "boot_file",
                    "is excluded from the upload",
                    spec.boot_file,
                    "remove its pattern from .malaunchignore",
                )
            out.append((files, upload.target))
        return out

    def upload(self, spec: JobSpec, request: CreateRequest) -> None:
        """Local file checks, then the credentials, then every bucket, then the uploads: a wrong key or a missing
        bucket fails before one byte is sent."""
        uploads = self._files(spec, request)
        self._api().check_credentials()  # a wrong key fails here, before anything is uploaded
        for _files, target in uploads:
            bucket, prefix = parse_obs_url(target)
            check_bucket(self.s3_client(), bucket, self._credentials(), self.endpoints.obs, prefix)
        for files, target in uploads:
            self._uploader().upload(files, target)
