"""What a malaunch profile may keep for the Volcano backend (``volcano.<key>`` in the profile file): where the
cluster is (kubeconfig, context: arguments of :func:`.backend.create_backend`), and the job's defaults
(namespace, queue: they fill the job file's ``volcano:`` section where it has none).

The registry reads :data:`PROFILE_KEYS` (:func:`malaunch.sdk.backends.registry.profile_keys`) only when a profile
is written, shown or used.
"""

from __future__ import annotations

from typing import Tuple

from ...profiles.keys import ProfileKey

__all__ = ["PROFILE_KEYS"]

_KUBECONFIG = "$KUBECONFIG's first file, ~/.kube/config, or the cluster's service account"
#: The keys, in the order ``ma-submit configure`` asks for them.
PROFILE_KEYS: Tuple[ProfileKey, ...] = (
    ProfileKey("kubeconfig", "the kubeconfig file", argument="kubeconfig", env="KUBECONFIG", default=_KUBECONFIG),
    ProfileKey("context", "the kubeconfig context", argument="context", default="the current context"),
    ProfileKey(
        "namespace",
        "the namespace of jobs and bare ids",
        fills="volcano.namespace",
        argument="namespace",
        default="the context's namespace",
    ),
    ProfileKey("queue", "the Volcano queue", fills="volcano.queue", default="default"),
)
