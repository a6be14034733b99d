"""When an endpoint cannot be reached, the one line says what was asked, why in words and where (host:port), and
the time really spent, not the sum of the waits planned (issue 29). Against a closed port on 127.0.0.1, with
real sleeps; the reported time is compared with the time measured around the call."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest
import requests
from fake_modelarts import FakeModelArts
from kubefake import FakeKube
from malaunch.sdk import BackendError
from malaunch.sdk.backends._http import RetryPolicy
from malaunch.sdk.backends.modelarts.api import ModelArtsClient
from malaunch.sdk.backends.modelarts.credentials import Credentials
from malaunch.sdk.backends.volcano.backend import VolcanoBackend
from modelarts_env import AK, PROJECT, SK

#: Waits of 0.3 s doubling, no jitter: the last wait planned (1.2 s) is never slept, and must not be counted.
POLICY = RetryPolicy(attempts=3, initial=0.3, jitter=0.0, connect_timeout=1.0, connect_budget=60.0)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again: nothing listens there


def reported_seconds(text: str, attempts: int) -> float:
    found = re.search(rf"\({attempts} attempts over (\d+\.\d)s\)", text)
    assert found, text
    return float(found.group(1))


def test_modelarts_says_the_time_spent_the_cause_and_where() -> None:
    port = closed_port()
    creds = Credentials(AK, SK, PROJECT, "cn-north-4", "the test")
    api = ModelArtsClient(requests.Session(), f"http://127.0.0.1:{port}", creds, policy=POLICY, sleep=time.sleep)
    start = time.monotonic()
    with pytest.raises(BackendError) as caught:
        api.get_job("x")
    spent = time.monotonic() - start
    text = str(caught.value)
    assert f"cannot reach the endpoint at 127.0.0.1:{port}, the connection was refused (nothing listens there)" in text
    assert spent >= 0.9  # it slept 0.3 + 0.6 s between its 3 attempts
    assert reported_seconds(text, 3) <= spent + 0.05, (text, spent)  # not 0.3 + 0.6 + 1.2 s
    assert "Error" not in text and "..." not in text and SK not in text


def test_kubernetes_says_the_operation_asked_for_the_cause_and_where(tmp_path: Path) -> None:
    server = FakeKube()
    config = server.kubeconfig(tmp_path / "kubeconfig")
    port = int(server.url.rsplit(":", 1)[1])
    server.close()  # nothing listens there any more
    backend = VolcanoBackend(kubeconfig=str(config), environ={}, policy=POLICY, sleep=time.sleep)
    start = time.monotonic()
    with pytest.raises(BackendError) as caught:
        backend.list()
    spent = time.monotonic() - start
    text = str(caught.value)
    assert text.startswith("listing Volcano jobs in namespace ml failed: "), text  # what `list` asked, not pods
    assert f"cannot reach the Kubernetes API at 127.0.0.1:{port}: the connection was refused" in text, text
    assert reported_seconds(text, 3) <= spent + 0.05, (text, spent)
    assert "NewConnectionError" not in text and "HTTPConnection" not in text and "..." not in text


def test_a_tls_handshake_that_fails_is_said_in_words_by_both_clients(tmp_path: Path) -> None:
    """An https:// endpoint where a plain HTTP server listens (a scheme written wrong): the handshake fails, and the
    line says so in words ("SSLError" was all it said), within the connect budget (Kubernetes retried 6 times)."""
    fake = FakeModelArts(AK, SK, PROJECT)
    fake.start()
    server = FakeKube()
    try:
        creds = Credentials(AK, SK, PROJECT, "cn-north-4", "the test")
        https = fake.url.replace("http://", "https://")
        api = ModelArtsClient(requests.Session(), https, creds, policy=POLICY, sleep=time.sleep)
        with pytest.raises(BackendError) as caught:
            api.get_job("x")
        text = str(caught.value)
        port = fake.url.rsplit(":", 1)[1]
        assert f"cannot reach the endpoint at 127.0.0.1:{port}, the TLS handshake failed: the server does not speak " \
            "TLS there (is it http://?) (3 attempts over" in text, text  # fmt: skip
        config = server.kubeconfig(tmp_path / "kubeconfig")
        config.write_text(config.read_text().replace("http://", "https://"))
        backend = VolcanoBackend(kubeconfig=str(config), environ={}, policy=POLICY, sleep=time.sleep)
        with pytest.raises(BackendError) as caught:
            backend.list()
        text = str(caught.value)
        port = server.url.rsplit(":", 1)[1]
        assert text.startswith(f"listing Volcano jobs in namespace ml failed: cannot reach the Kubernetes API at "
                               f"127.0.0.1:{port}: the TLS handshake failed: the server does not speak TLS there"), text
        assert "SSLError" not in text and "(3 attempts over" in text
    finally:
        fake.stop()
        server.close()
