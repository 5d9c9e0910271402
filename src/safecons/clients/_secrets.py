"""One scrubber for every text that comes back from a server, and the checks that keep a
secret out of what a client shows and carries.

A server, a gateway or an HTTP library can echo what the client sent: the ``Authorization``
header in a 200's body, the key in a 401's message, a custom header in a 500. Every text safecons
keeps from a server (answers, error bodies, reasons, exception messages) passes
:meth:`Secrets.scrub` *before* it is cut to length, so no part of a secret survives a cut.

A base URL is shown (the CLI, reprs), kept (the cache's endpoint column) and quoted in every
error, so :func:`check_base_url` refuses one that could hold a secret, without echoing it. A
key read from the environment is read by :func:`key_from_env`, whose messages name the
variable and never its value.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import os
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Final

import httpx

from ..errors import InputError

__all__ = (
    "MIN_SECRET_LENGTH",
    "SCRUBBED",
    "Secrets",
    "check_base_url",
    "check_env_name",
    "is_loopback",
    "is_secret_header",
    "key_from_env",
    "shown_env_name",
)

#: What a secret is replaced by.
SCRUBBED: Final[str] = "<api key>"

#: Values shorter than this are not treated as secrets: replacing a short placeholder key
#: (Ollama's documented ``"ollama"``) everywhere it occurs would corrupt answers and protect
#: nothing.
MIN_SECRET_LENGTH: Final[int] = 8
#: A run of this many leading characters of a secret is scrubbed too, wherever it stands: a
#: secret cut short (by a gateway that truncates its echo, or by a message cut after a value
#: was decoded) still leaves no more than this much of itself.
PREFIX_LENGTH: Final[int] = 12

# Header names whose values are credentials (Authorization, Azure's api-key, x-api-key,
# Proxy-Authorization, cookies, signed-request headers, ...).
_SECRET_HEADER: Final = re.compile(
    r"auth|key|token|secret|cookie|passw|signature|credential|session", re.IGNORECASE
)
# "Bearer sk-..." / "Basic ..." / "Token ...": the credential after the scheme is a secret
# of its own, since a server may echo it without the scheme.
_SCHEME: Final = re.compile(r"^\s*[A-Za-z][A-Za-z0-9_-]*\s+(\S+)\s*$")
# 'Token token="..."', 'Digest username="...", response="..."': quoted or assigned values.
_ASSIGNED: Final = re.compile(r"=\s*\"?([^\",\s]+)")


def is_secret_header(name: str) -> bool:
    """Whether a header of this name carries a credential.

    Examples
    --------
    >>> [is_secret_header(h) for h in ("Authorization", "api-key", "X-Trace-Id")]
    [True, True, False]
    """
    return bool(_SECRET_HEADER.search(name))


class Secrets:
    """The secrets a client sends, and :meth:`scrub` to take them out of any text.

    Each secret is also known in its JSON-escaped form, which is how a server quoting the
    request back inside a JSON body writes it.

    Examples
    --------
    >>> s = Secrets.of(api_key="sk-0123456789abcdef", headers={"X-Api-Key": "team-key-42aa"})
    >>> s.scrub("bad key sk-0123456789abcdef for team-key-42aa")
    'bad key <api key> for <api key>'
    >>> s
    Secrets(<2 hidden>)
    """

    __slots__ = ("_heads", "_pattern", "_sources", "_values")

    def __init__(self, values: Iterable[object] = ()) -> None:
        # The values as given, so that joining two sets derives each value's forms once.
        self._sources = tuple(v for v in values if isinstance(v, str))
        found: set[str] = set()
        for value in self._sources:
            forms = (
                value,
                value.strip(),
                json.dumps(value)[1:-1],  # quoted back inside a JSON body
                json.dumps(value).replace("/", "\\/")[1:-1],  # ... by an escaper of "/"
                urllib.parse.quote(value, safe=""),  # in a URL or a form
                urllib.parse.quote_plus(value),
            )
            found.update(form for form in forms if len(form) >= MIN_SECRET_LENGTH)
        self._values = tuple(sorted(found, key=len, reverse=True))
        # Whole secrets first (longest first, so one that contains another goes whole), then
        # the heads of secrets cut short, each replaced as far as any form of it runs on.
        self._pattern = re.compile("|".join(map(re.escape, self._values))) if self._values else None
        heads = sorted({v[:PREFIX_LENGTH] for v in self._values if len(v) > PREFIX_LENGTH})
        self._heads = re.compile("|".join(map(re.escape, heads))) if heads else None

    @classmethod
    def of(cls, *, api_key: str | None = None, headers: Mapping[str, str] | None = None) -> Secrets:
        """The secrets of a client: its key and every credential-like header value."""
        values: list[str] = [api_key] if api_key else []
        for name, value in (headers or {}).items():
            if isinstance(name, str) and isinstance(value, str) and is_secret_header(name):
                values.append(value)
                scheme = _SCHEME.match(value)
                if scheme:
                    values.append(scheme.group(1))
                    values.extend(_basic(scheme.group(1)))
                values.extend(_ASSIGNED.findall(value))
        return cls(values)

    def __or__(self, other: Secrets) -> Secrets:
        return Secrets((*self._sources, *other._sources))

    def __bool__(self) -> bool:
        return bool(self._values)

    def __repr__(self) -> str:
        return f"Secrets(<{len(self._values)} hidden>)"

    def scrub(self, text: str) -> str:
        """``text`` with every secret, and every head of one cut short, replaced."""
        if self._pattern is None or not text:
            return text
        text = self._pattern.sub(SCRUBBED, text)
        if self._heads is None or self._heads.search(text) is None:
            return text
        # A head of a secret cut short: swallow as much of it as follows, whichever form.
        out: list[str] = []
        pos = 0
        while (match := self._heads.search(text, pos)) is not None:
            start = match.start()
            longest = max(_common(text, start, v) for v in self._values)
            out.append(text[pos:start])
            out.append(SCRUBBED)
            pos = start + max(longest, len(match.group()))
        out.append(text[pos:])
        return "".join(out)


def _common(text: str, start: int, secret: str) -> int:
    """How many leading characters of ``secret`` stand in ``text`` from ``start``."""
    n = 0
    for a, b in zip(secret, text[start : start + len(secret)], strict=False):
        if a != b:
            break
        n += 1
    return n


def _basic(token: str) -> list[str]:
    """The ``user:password`` and the password inside a Basic credential, when it is one."""
    try:
        decoded = base64.b64decode(token, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return []
    _user, sep, password = decoded.partition(":")
    return [decoded, password] if sep and password else []


# ----------------------------------------------------------------------------- base URLs

_NOT_SHOWN: Final = "(the value is not shown: it may hold a secret)"


def check_base_url(url: object, name: str = "base_url", *, from_env: bool = False) -> str:
    """``url`` as an API root safecons can show and keep: ``scheme://host[:port][/path]``.

    Refused, in this order and by a message that never quotes the value: whitespace at an
    end (stripped instead for a value ``from_env``, as keys from the environment are) or
    whitespace and control characters anywhere; an ``@`` (credentials, ``user:pw@host``);
    a ``?`` (a query string, where gateways take keys); a ``#``; a ``;`` (path parameters,
    another place for a key); then a value that does not
    parse, whose scheme is not ``http``/``https`` (in any case), or that has no host or a
    bad port. The scheme is written in lower case; a trailing ``/`` is dropped.

    Examples
    --------
    >>> check_base_url("HTTP://localhost:8000/v1/")
    'http://localhost:8000/v1'
    >>> check_base_url("http://user:hunter2@localhost/v1")
    Traceback (most recent call last):
    ...
    safecons.errors.InputError: base_url: credentials in the URL (user:password@host) are ...
    """
    if not isinstance(url, str):
        raise InputError(f"{name}: expected an http(s) URL as a string, got {type(url).__name__}")
    if from_env:
        url = url.strip()
    elif url != url.strip():
        raise InputError(f"{name}: has whitespace at an end; strip it {_NOT_SHOWN}")
    if not url.isprintable() or any(c.isspace() for c in url):
        raise InputError(f"{name}: holds whitespace or control characters {_NOT_SHOWN}")
    # The secret checks come first, on the raw text: a URL that does not parse, or whose
    # scheme is wrong, may still hold a password, and no later message may quote it.
    if "@" in url:
        raise InputError(
            f"{name}: credentials in the URL (user:password@host) are not supported; pass "
            f"api_key=, api_key_env= or headers= {_NOT_SHOWN}"
        )
    if "?" in url:
        raise InputError(
            f"{name}: a query string (?...) is not supported: a key in it would be shown and "
            "stored, and the request URL would be wrong; pass a key as api_key=, api_key_env= "
            f"or headers= (Azure's api-version: OpenAICompatible.azure) {_NOT_SHOWN}"
        )
    if "#" in url:
        raise InputError(f"{name}: a fragment (#...) is not part of an API root {_NOT_SHOWN}")
    if ";" in url:
        # Path parameters (;api_key=...) are another place gateways take keys.
        raise InputError(f"{name}: a ';' (path parameters) is not supported {_NOT_SHOWN}")
    example = "such as http://localhost:8000/v1"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number in 0-65535
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL):
        raise InputError(f"{name}: not a valid URL, {example} {_NOT_SHOWN}") from None
    if parts.scheme not in ("http", "https"):
        raise InputError(f"{name}: expected an http(s) URL, {example} {_NOT_SHOWN}")
    if not parts.hostname:
        raise InputError(f"{name}: the URL has no host, {example} {_NOT_SHOWN}")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")).rstrip("/")


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost``, an address in 127.0.0.0/8 or
    ``::1`` (an IPv4-mapped one too). Other names that may resolve to it (``*.localhost``, a
    name in /etc/hosts) are not taken on trust.

    Examples
    --------
    >>> [is_loopback(h) for h in ("LOCALHOST", "127.8.9.10", "::1", "[::1]", "10.0.0.1")]
    [True, True, True, True, False]
    """
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


# ----------------------------------------------------------------------------- keys


def check_env_name(name: object, param: str = "api_key_env") -> str:
    """``name`` if it can name an environment variable (never echoed when it cannot).

    Examples
    --------
    >>> check_env_name("MY_GATEWAY_KEY")
    'MY_GATEWAY_KEY'
    """
    if not isinstance(name, str) or not name or "=" in name or not name.isprintable():
        raise InputError(
            f"{param}: expected the name of an environment variable (a non-empty string "
            "without '=' or control characters; the value is not shown)"
        )
    return name


# Variable names shown in messages: the convention (upper case, digits, _). Anything else
# may be a key pasted where its variable's name belongs, and is not echoed.
_SHOWN_NAME: Final = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")


def shown_env_name(name: str) -> str:
    """How a variable's name appears in a message: quoted, or withheld if it may be a key.

    Examples
    --------
    >>> shown_env_name("OPENAI_API_KEY")
    "'OPENAI_API_KEY'"
    >>> shown_env_name("sk-proj-0123456789abcdef")
    '(name not shown: not an UPPER_CASE name, it may be a key)'
    """
    if _SHOWN_NAME.fullmatch(name):
        return repr(name)
    return "(name not shown: not an UPPER_CASE name, it may be a key)"


def key_from_env(name: str, *, required: bool) -> tuple[str | None, str | None]:
    """(key, problem): the key in the variable ``name``, stripped of surrounding whitespace.

    No key (unset or empty) is a problem only when ``required``; a key with control or
    non-ASCII characters always is. A problem's text names the variable, never its value.

    Examples
    --------
    >>> os.environ["SAFECONS_DOCTEST_KEY"] = " sk-0123456789 "
    >>> key_from_env("SAFECONS_DOCTEST_KEY", required=True)
    ('sk-0123456789', None)
    >>> del os.environ["SAFECONS_DOCTEST_KEY"]
    >>> key_from_env("SAFECONS_DOCTEST_KEY", required=False)
    (None, None)
    >>> key_from_env("SAFECONS_DOCTEST_KEY", required=True)[1]
    "api_key_env: the environment variable 'SAFECONS_DOCTEST_KEY' is not set or is empty"
    """
    raw = os.environ.get(name)
    key = raw.strip() if raw is not None else ""
    if not key:
        if not required:
            return None, None
        return None, (
            f"api_key_env: the environment variable {shown_env_name(name)} is not set or is empty"
        )
    if not key.isascii() or not key.isprintable():
        return None, (
            f"api_key: the key in the environment variable {shown_env_name(name)} holds control "
            "or non-ASCII characters (the key is not shown)"
        )
    return key, None
