"""Render a parsed rank table in the v1.0 layout, for tables HCCL cannot read as they are.

ModelArts' own bootstrap converts the CCE ``jobstart_hccl.json`` ("v0": pods, no ``rank_id``) into a v1.0
table and points ``RANK_TABLE_FILE`` at the converted file before it starts the ranks; the shim does the same.
The conversion is pure: :func:`to_v1_text` returns the file's text, which the plan carries and the supervisor
writes before any rank starts.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from .rank_table import RankTable

__all__ = ["CONVERTED_FORMATS", "to_v1_text"]

#: Formats the fan-out hands to the ranks as a converted v1.0 file rather than as given.
CONVERTED_FORMATS = ("v0",)


def to_v1_text(table: RankTable) -> str:
    """The table as v1.0 JSON text: one ``server_list`` entry per ``server_id`` (pods on one node merged), all
    values strings, ranks as parsed (for v0: pods ordered by their numeric suffix, devices in listed order)."""
    servers: Dict[str, List[Dict[str, str]]] = {}
    for server in table.servers:
        devices = servers.setdefault(server.server_id, [])
        for device in server.devices:
            entry = {"device_id": device.device_id, "rank_id": str(device.rank_id)}
            if device.device_ip is not None:
                entry["device_ip"] = device.device_ip
            devices.append(entry)
    data: Dict[str, Any] = {
        "version": "1.0",
        "server_count": str(len(servers)),
        "server_list": [
            {"server_id": server_id, "device": devices, "host_nic_ip": "reserve"}
            for server_id, devices in servers.items()
        ],
        "status": "completed",
    }
    return json.dumps(data, indent=2) + "\n"
