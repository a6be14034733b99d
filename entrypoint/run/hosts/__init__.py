"""The hosts of a multi-host job coordinate themselves: the master host's shim serves a coordinator, every
host's shim (the master's too) joins it for the job's life.

- :mod:`.wire`: lines proved with the job's secret (HMAC), never the secret itself;
- :mod:`.messages`: the messages, one typed record each, read off the wire in one place (their table is its
  docstring; :mod:`.fields` reads their fields, :mod:`.cause` holds an attempt's root cause as they carry it);
  :mod:`.members`: an elastic attempt's hosts within one line;
- :mod:`.saves`: a checkpoint's save completed through the coordinator where each host's folder is its own;
- :mod:`.jobstate`: the coordinator's book, pure: who is here (its :mod:`.roster`), the job's one attempt
  number, the root cause of each attempt, restart or finish;
- :mod:`.server`: the coordinator (one thread, one selector) on ``MALAUNCH_COORDINATOR_PORT``; on the master,
  :mod:`.bookwatch` says what its book does to the job's hosts;
- :mod:`.link`: a host's side (join, heartbeats, commands);
- :mod:`.jobloop`: :class:`~.jobloop.Coordinated`, the one attempt loop (:mod:`..attempts`) deciding as the
  coordinator says.

:func:`hosts_config` makes what they need from the contract's coordinator settings
(:class:`~...contract.config.CoordinatorSettings`); a one-host job has none (:func:`hosts_config` returns None) and
runs exactly as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional

if TYPE_CHECKING:
    from ...contract.config import CoordinatorSettings

__all__ = ["HostsConfig", "hosts_config"]


class HostsConfig(NamedTuple):
    """How this host reaches the others (from the environment; the secret is never shown)."""

    host: int  # this host's index (0: the master, which serves the coordinator)
    num_hosts: int
    addr: str  # this host's address, as the others' messages name it
    master: str  # the master host's address or name
    port: int
    secret: str  # MALAUNCH_JOB_SECRET, else the job's name
    secret_given: bool
    heartbeat_timeout: float
    host_wait: float
    join_wait: float
    min_hosts: Optional[int] = None  # elastic torchrun (MALAUNCH_MIN_HOSTS): the fewest hosts an attempt may have
    procs_per_host: int = 1  # ranks per host (an elastic attempt's world size is its hosts times this)

    @property
    def interval(self) -> float:
        """Seconds between heartbeats, both ways: a fifth of the timeout, at most 2 s."""
        return max(0.1, min(2.0, self.heartbeat_timeout / 5.0))

    def __repr__(self) -> str:  # never the secret
        return (f"HostsConfig(host={self.host}, num_hosts={self.num_hosts}, master={self.master!r}, "
                f"port={self.port}, secret_given={self.secret_given})")  # fmt: skip


def hosts_config(settings: Optional[CoordinatorSettings], host: int, num_hosts: int, addr: str,
                 master: Optional[str], job_name: str, join_wait: float, min_hosts: Optional[int] = None,
                 procs_per_host: int = 1) -> Optional[HostsConfig]:  # fmt: skip
    """This host's coordinator settings; None for a one-host job, one whose master is unknown, or one that
    opted out (``MALAUNCH_COORDINATOR=False``). Pure."""
    if settings is None or num_hosts < 2 or not master or not settings.wanted:
        return None
    secret = settings.secret
    return HostsConfig(host, num_hosts, addr, master, settings.port, secret or job_name, secret is not None,
                       settings.heartbeat_timeout, settings.host_wait, join_wait, min_hosts,
                       procs_per_host)  # fmt: skip
