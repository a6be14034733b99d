"""The environment variables the ModelArts backend reads: the credentials (one set, Huawei Cloud SDK's names), the
profile file of the legacy ``modelarts.ini`` and the API endpoints. Kept apart from :mod:`.credentials` (which reads
them) so that a profile's keys (:mod:`.profile`) can name them without loading what reads credentials.
"""

from __future__ import annotations

__all__ = [
    "ENV_AK",
    "ENV_MODELARTS_ENDPOINT",
    "ENV_OBS_ENDPOINT",
    "ENV_PROFILE",
    "ENV_PROJECT_ID",
    "ENV_REGION",
    "ENV_SECURITY_TOKEN",
    "ENV_SK",
]

ENV_AK = "HUAWEICLOUD_SDK_AK"
ENV_SK = "HUAWEICLOUD_SDK_SK"
ENV_PROJECT_ID = "HUAWEICLOUD_SDK_PROJECT_ID"
ENV_REGION = "HUAWEICLOUD_SDK_REGION"
ENV_SECURITY_TOKEN = "HUAWEICLOUD_SDK_SECURITY_TOKEN"
ENV_PROFILE = "MALAUNCH_MODELARTS_PROFILE"
ENV_MODELARTS_ENDPOINT = "MALAUNCH_MODELARTS_ENDPOINT"
ENV_OBS_ENDPOINT = "MALAUNCH_OBS_ENDPOINT"
