"""argparse `type=` functions for the agents' command lines: a value that cannot exist (a port
above 65535, a rate of NaN, a name with an empty label) is refused while the arguments are
parsed, so the program exits 2 with argparse's "argument --port: ..." line instead of a traceback
later. Each raises argparse.ArgumentTypeError naming the value and what it must be."""

from __future__ import annotations

import argparse
import ipaddress
import math


def _refuse(text: str, rule: str):
    raise argparse.ArgumentTypeError(f"{text!r} {rule}")


def port(text: str) -> int:
    """A UDP/TCP port a packet can be sent to: 1..65535."""
    try:
        v = int(text)
    except ValueError:
        _refuse(text, "is not a port number (a whole number 1-65535)")
    if not 1 <= v <= 65535:
        _refuse(text, "is out of range for a port (1-65535)")
    return v


def ipv4(text: str) -> str:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        _refuse(text, "is not an IPv4 address")
    return text


def ipv4_or_empty(text: str) -> str:
    return text if text == "" else ipv4(text)


def dns_name(text: str) -> str:
    """A domain name dnspython accepts (no empty label, labels <= 63 and the name <= 255 octets);
    returned as given, the caller converts with dns.name.from_text."""
    import dns.exception
    import dns.name
    try:
        dns.name.from_text(text)
    except dns.exception.DNSException as e:
        _refuse(text, f"is not a domain name ({e})")
    return text


def checked(kind, what: str, ok, rule: str):
    """A `type=` function: kind(text), refused unless ok(value); rule says what it must be."""
    def convert(text: str):
        try:
            v = kind(text)
        except ValueError:
            _refuse(text, f"is not {what}")
        if not ok(v):
            _refuse(text, rule)
        return v
    return convert


positive_int = checked(int, "a whole number", lambda v: v >= 1, "must be at least 1")
positive_float = checked(float, "a number", lambda v: math.isfinite(v) and v > 0, "must be a finite number above 0")
non_negative_float = checked(float, "a number", lambda v: math.isfinite(v) and v >= 0, "must be a finite number, 0 or more")


def bounded_int(lo: int, hi: int):
    return checked(int, "a whole number", lambda v: lo <= v <= hi, f"is out of range ({lo}-{hi})")
