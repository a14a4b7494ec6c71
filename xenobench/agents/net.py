"""Addresses as the data plane sees them: MAC text ↔ bytes."""

from __future__ import annotations

import re

MAC_RE = re.compile(r"[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}")


def normalize_mac(mac: str) -> str:
    """Lower-case colon form; raises ValueError for anything that is not six hex octets."""
    if not isinstance(mac, str) or not MAC_RE.fullmatch(mac):
        raise ValueError(f"{mac!r} is not a MAC address (expected six hex octets like 02:00:00:00:01:00)")
    return mac.lower()


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(normalize_mac(mac).replace(":", ""))
