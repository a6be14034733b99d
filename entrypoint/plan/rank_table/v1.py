"""Render a parsed rank table in the v1.0 layout, for tables HCCL cannot read as they are.

ModelArts' own bootstrap converts the CCE ``jobstart_hccl.json`` ("v0": pods, no ``rank_id``) into a v1.0
table and points ``RANK_TABLE_FILE`` at the converted file before it starts the ranks; the shim does the same.
The conversion is pure: :func:`to_v1_text` returns the file's text, which the plan carries and the supervisor
writes before any rank starts.
"""

from __future__ import annotations

from typing import Dict, List, Sequence

from ..jsontext import quoted as _quoted
from . import RankTable, Server

__all__ = ["CONVERTED_FORMATS", "to_v1_text"]

#: Formats the fan-out hands to the ranks as a converted v1.0 file rather than as given.
CONVERTED_FORMATS = ("v0",)

# Device ids are canonical decimal strings (the parse guarantees it), so only IPs and server ids need quoting.
_DEVICE = '{"device_id": "%s", "rank_id": "%d", "device_ip": %s}'
_DEVICE_NO_IP = '{"device_id": "%s", "rank_id": "%d"}'


def to_v1_text(table: RankTable) -> str:
    """The table as v1.0 JSON text: one ``server_list`` entry per ``server_id`` (pods on one node merged), all
    values strings, ranks as parsed (for v0: pods ordered by their numeric suffix, devices in listed order).

    One line per server. Devices are formatted straight from the table's columns by C-level ``%`` formatting, with
    no object per device: ``json.dumps(..., indent=2)`` runs the pure-Python encoder, about 0.4 s for 32,768
    devices.
    """
    servers: Dict[str, List[str]] = {}
    for server in table.servers:
        servers.setdefault(server.server_id, []).append(_devices_text(server))
    entries = ",\n  ".join(f'{{"server_id": {_quoted(server_id)}, "device": [{", ".join(devices)}], '
                           '"host_nic_ip": "reserve"}' for server_id, devices in servers.items())
    head = f'{{"version": "1.0", "server_count": "{len(servers)}", "status": "completed"'
    return f'{head}, "server_list": [\n  {entries}\n]}}\n'


def _devices_text(server: Server) -> str:
    ids, ips, ranks = server.columns
    window = slice(server.start, server.end)
    if None in ips[window]:
        return ", ".join(_DEVICE_NO_IP % (device_id, rank) if ip is None else _DEVICE % (device_id, rank, _quoted(ip))
                         for device_id, ip, rank in zip(ids[window], ips[window], ranks[window]))
    present: Sequence[str] = ips[window]  # type: ignore[assignment]  # no None: checked above
    quoted_ips = map(_quoted, present)
    return ", ".join(map(_DEVICE.__mod__, zip(ids[window], ranks[window], quoted_ips)))
