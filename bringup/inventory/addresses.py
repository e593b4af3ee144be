"""Addresses an inventory names (``ansible_host``, a HostName, a jump host, ``bench --address``): a host name or an
IP address ssh can take as it is, never a port, a user, a pattern, or a number the resolver would fill in as
another host.  Split from :mod:`bringup.inventory.hosts`; the ssh layer and the bench ask it too.
"""
from __future__ import annotations

import ipaddress
import re
import socket

__all__ = ["address_problem"]

_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,252})")
#: What inet_aton(3), and so getaddrinfo, reads as an IPv4 address: one to four parts, each decimal, 0x-hex or
#: 0-octal.  Such a name is an address only as a dotted quad of decimal parts; any other is refused.
_INET_ATON = re.compile(r"(?:(?:0[xX][0-9A-Fa-f]*|[0-9]+)\.){0,3}(?:0[xX][0-9A-Fa-f]*|[0-9]+)\.?")


def address_problem(address: str) -> str | None:
    """Why ``address`` is no host name or IP address ssh can take as it is, or None.  A port, a user, a pattern
    or a list in it (``a:22``, ``u@a``, ``x,*``) would be read by Fabric as such, or written into known_hosts as a
    pattern that matches other hosts (``*``)."""
    if _HOST_NAME.fullmatch(address):
        if _INET_ATON.fullmatch(address):
            try:
                ipaddress.IPv4Address(address)
            except ValueError:
                try:
                    socket.inet_aton(address)
                except OSError:
                    return "a number that is no IPv4 address (four decimal parts, each 0-255) and no host name"
                return ("a number that is no dotted-quad IPv4 address: the resolver would read it as one, filling "
                        "in zeros ('10.1' is 10.0.0.1, '1.5' 1.0.0.5) and hex or octal parts ('0x10', '010'); write "
                        "the address's four decimal parts, or the host's name")
        return None
    host, _, zone = address.partition("%")
    try:
        if ipaddress.ip_address(host).version == 6 and (not _ or _HOST_NAME.fullmatch(zone)):
            return None
    except ValueError:
        pass
    return ("not a host name or IP address (letters, digits, '.', '-', '_', or an IPv6 address; no port, user, "
            "space or pattern characters such as ',', '*', '?', '!', '@', ':')")
