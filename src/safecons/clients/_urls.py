"""Two spellings of one server's URL, read as one: for telling judges apart, never for what is
sent or for a cache key."""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from typing import Final

__all__ = ("LOOPBACK", "comparable_url")

#: How the loopback host is named in a comparable URL: ``localhost``, ``127.0.0.1`` and ``::1``
#: (in any spelling of the address) are this machine, and a server listening on one port of it
#: is one server whichever of them a URL names.
LOOPBACK: Final = "localhost"

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_EMPTY_SEGMENTS: Final = re.compile(r"/{2,}")


def _host(hostname: str) -> str:
    host = hostname.lower().rstrip(".")
    if host == LOOPBACK:
        return LOOPBACK
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address in (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")):
        return LOOPBACK
    return f"[{address.compressed}]" if isinstance(address, ipaddress.IPv6Address) else str(address)


def comparable_url(url: str) -> str:
    """``url`` written one way for every spelling of the same server and path: the scheme and
    host in lower case (a trailing dot of the host dropped), the loopback host as
    :data:`LOOPBACK`, the scheme's default port left out, empty path segments and a trailing
    ``/`` dropped. The path keeps its case (servers read it so). A URL that does not parse is
    returned as it is.

    Examples
    --------
    >>> comparable_url("http://LOCALHOST:8000/v1/")
    'http://localhost:8000/v1'
    >>> comparable_url("http://127.0.0.1:8000//v1") == comparable_url("http://[::1]:8000/v1")
    True
    >>> comparable_url("https://API.example.com:443/v1/chat//completions")
    'https://api.example.com/v1/chat/completions'
    """
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return url
    scheme, hostname = parts.scheme.lower(), parts.hostname
    if not hostname:
        return url
    netloc = _host(hostname)
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        netloc = f"{netloc}:{port}"
    path = _EMPTY_SEGMENTS.sub("/", parts.path).rstrip("/")
    return urllib.parse.urlunsplit((scheme, netloc, path, parts.query, ""))
