"""How the local backend gives each emulated host its own address: loopback aliases or network namespaces.

:class:`HostNetwork` is the seam. Its pure half (``addresses``, ``wrap``, ``to_json``) is used while planning;
its I/O half (``setup``, ``teardown``) runs in the job runner around the hosts' lifetime.

- :class:`LoopbackNetwork`: hosts get ``127.0.0.1``, ``127.0.0.2``, ... All of 127/8 is local on Linux, so
  every address works without setup; but every host also sees every other address as its own, which msrun
  (it starts its scheduler on whichever host owns ``master_addr``) cannot cope with across hosts.
- :class:`NetnsNetwork`: one network namespace per host (``malaunch-<short id>-<i>``), each with a veth pair
  into a bridge namespace (``malaunch-<short id>-br``) and an address ``10.233.<x>.<i+1>/24``; hosts are
  started through ``ip netns exec``. Needs root and iproute2. ``teardown`` deletes every namespace and is
  safe to call twice.
"""

from __future__ import annotations

import abc
import contextlib
import os
from typing import Any, Callable, ClassVar, Dict, List, Mapping, Sequence, Tuple, TypeAlias

from ...errors import BackendError, ConfigError

__all__ = [
    "LOOPBACK",
    "NETNS",
    "HostNetwork",
    "LoopbackNetwork",
    "NetnsNetwork",
    "network_from_json",
    "tear_down_recorded",
]

LOOPBACK = "loopback"
NETNS = "netns"
Runner: TypeAlias = "Callable[[Sequence[str]], None]"


def _run(argv: Sequence[str]) -> None:
    import subprocess  # only a network namespace runs commands: loopback jobs (and reading any job) need none

    proc = subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BackendError(
            f"{' '.join(argv)} failed with exit code {proc.returncode}: {proc.stderr.strip()[:300]}; "
            "check that you are root and iproute2 is installed"
        )


class HostNetwork(abc.ABC):
    """Addresses and process wrapping for the emulated hosts of one job."""

    kind: ClassVar[str] = ""

    def __init__(self, job_id: str, hosts: int) -> None:
        self.job_id = job_id
        self.hosts = hosts

    @abc.abstractmethod
    def addresses(self) -> Tuple[str, ...]:
        """One distinct address per host, master first. Pure."""

    def wrap(self, index: int, argv: Sequence[str]) -> Tuple[str, ...]:
        """The argv that starts ``argv`` as host ``index``. Pure."""
        return tuple(argv)

    def setup(self) -> None:  # noqa: B027 - a no-op by default: loopback addresses need nothing
        """Create whatever the addresses need (runs in the job runner)."""

    def teardown(self) -> None:  # noqa: B027 - a no-op by default, like setup
        """Remove what ``setup`` created; idempotent."""

    def to_json(self) -> Dict[str, Any]:
        """JSON-ready description, enough for :func:`network_from_json`."""
        return {
            "kind": self.kind,
            "job_id": self.job_id,
            "hosts": self.hosts,
            "addresses": list(self.addresses()),
        }


class LoopbackNetwork(HostNetwork):
    """Hosts on ``127.0.0.1``, ``127.0.0.2``, ...: no setup, no privileges."""

    kind: ClassVar[str] = LOOPBACK

    def addresses(self) -> Tuple[str, ...]:
        return tuple(f"127.0.{i // 254}.{i % 254 + 1}" for i in range(self.hosts))


class NetnsNetwork(HostNetwork):
    """One network namespace per host behind a bridge namespace; needs root and ``ip``."""

    kind: ClassVar[str] = NETNS

    def __init__(self, job_id: str, hosts: int, run: Runner = _run) -> None:
        super().__init__(job_id, hosts)
        self._run = run
        import hashlib

        self.short = hashlib.sha1(job_id.encode("utf-8")).hexdigest()[:6]

    @property
    def subnet(self) -> int:
        """The ``x`` in ``10.233.x.0/24`` (from the job id, so concurrent jobs differ in their addresses)."""
        return int(self.short, 16) % 250 + 1

    def namespace(self, index: int) -> str:
        """Namespace name of host ``index``."""
        return f"malaunch-{self.short}-{index}"

    @property
    def bridge_namespace(self) -> str:
        """Namespace holding the bridge that joins the hosts."""
        return f"malaunch-{self.short}-br"

    def namespaces(self) -> Tuple[str, ...]:
        """Every namespace of the job, bridge first."""
        return (self.bridge_namespace, *(self.namespace(i) for i in range(self.hosts)))

    def addresses(self) -> Tuple[str, ...]:
        return tuple(f"10.233.{self.subnet}.{i + 1}" for i in range(self.hosts))

    def wrap(self, index: int, argv: Sequence[str]) -> Tuple[str, ...]:
        return ("ip", "netns", "exec", self.namespace(index), *argv)

    def to_json(self) -> Dict[str, Any]:
        data = super().to_json()
        data["namespaces"] = list(self.namespaces())
        return data

    @staticmethod
    def check_available(hosts: int) -> None:
        """Raise ``ConfigError`` unless this process may create namespaces."""
        import shutil

        if os.geteuid() != 0 or shutil.which("ip") is None:
            raise ConfigError(
                f"msrun across {hosts} emulated hosts needs network namespaces",
                f"euid={os.geteuid()}",
                "run as root with iproute2 (the 'ip' command), or use resources.hosts: 1",
            )

    def setup(self) -> None:
        bridge = self.bridge_namespace
        commands: List[Tuple[str, ...]] = [
            ("ip", "netns", "add", bridge),
            ("ip", "-n", bridge, "link", "set", "lo", "up"),
            ("ip", "-n", bridge, "link", "add", "br0", "type", "bridge"),
            ("ip", "-n", bridge, "link", "set", "br0", "up"),
        ]
        for index, address in enumerate(self.addresses()):
            ns = self.namespace(index)
            outer, inner = f"mlo{self.short}{index}", f"mli{self.short}{index}"
            commands += [
                ("ip", "netns", "add", ns),
                ("ip", "-n", ns, "link", "set", "lo", "up"),
                (
                    "ip",
                    "-n",
                    bridge,
                    "link",
                    "add",
                    outer,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    inner,
                    "netns",
                    ns,
                ),
                ("ip", "-n", bridge, "link", "set", outer, "master", "br0"),
                ("ip", "-n", bridge, "link", "set", outer, "up"),
                ("ip", "-n", ns, "link", "set", inner, "name", "eth0"),
                ("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"),
                ("ip", "-n", ns, "link", "set", "eth0", "up"),
            ]
        try:
            for argv in commands:
                self._run(argv)
        except BaseException:
            self.teardown()
            raise

    def teardown(self) -> None:
        for ns in self.namespaces():
            if any(os.path.exists(os.path.join(root, ns)) for root in ("/run/netns", "/var/run/netns")):
                # Already gone or busy: a later teardown (stop, the next runner pass) retries.
                with contextlib.suppress(BackendError):
                    self._run(("ip", "netns", "delete", ns))


def network_from_json(data: Dict[str, Any]) -> HostNetwork:
    """Rebuild a network from :meth:`HostNetwork.to_json` (the runner reads it from ``plan.json``)."""
    kind, job_id, hosts = data.get("kind"), str(data.get("job_id")), int(data.get("hosts", 1))
    if kind == NETNS:
        return NetnsNetwork(job_id, hosts)
    return LoopbackNetwork(job_id, hosts)


def tear_down_recorded(request: Mapping[str, Any]) -> None:
    """Delete what the network a job's plan recorded (its ``request``'s ``network``) still has: nothing for loopback
    addresses or a damaged record. Safe to call twice, and after the runner did."""
    network = request.get("network")
    if isinstance(network, dict):
        with contextlib.suppress(KeyError, TypeError, ValueError):
            network_from_json(network).teardown()
