"""Which proxy a request to a URL goes through, read from the environment as httpx reads it.

Every request a client makes (over the aiohttp wire or httpx's own transport, live or the
Batch API's) must honour ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY``
alike: behind a company proxy a request that went direct would fail, or leak past the proxy.
httpx applies them only when it makes its own transport, so the aiohttp wire asks here.

A proxy URL may hold a user name and password (``http://user:pw@proxy:3128``). They are
secrets as the API key is (:func:`proxy_secrets`: every client scrubs them from what it
keeps), and a proxy URL that does not parse is refused here, naming the variable, before
httpx or aiohttp can quote it in an error (:func:`check_proxy_variables`).
"""

from __future__ import annotations

import base64
import functools
import os
import urllib.parse
import warnings
from typing import Final

import httpx

from ..errors import InputError, ProxyWarning
from ._secrets import Secrets

__all__ = ("check_proxy_variables", "environment_proxy", "proxy_secrets", "socks_proxy")

#: The schemes of a proxy URL httpx takes (aiohttp only the first two: SOCKS goes by httpx).
PROXY_SCHEMES: Final = ("http", "https", "socks5", "socks5h")
#: The variables httpx reads a proxy from, by the scheme of the URL requested.
_READ: Final = ("http", "https", "all")


def environment_proxy(url: str) -> str | None:
    """The proxy URL the environment names for requests to ``url``, or None (none set, or
    ``NO_PROXY`` exempts its host).

    The rules are httpx's own (``trust_env``): ``HTTPS_PROXY``/``HTTP_PROXY`` by the URL's
    scheme, else ``ALL_PROXY``; ``NO_PROXY`` by host, domain suffix, IP address or ``*``, as
    curl reads it.

    Examples
    --------
    >>> import os
    >>> os.environ["HTTPS_PROXY"] = "http://proxy.corp:3128"
    >>> os.environ["NO_PROXY"] = "localhost,.internal"
    >>> environment_proxy("https://api.openai.com/v1/chat/completions")
    'http://proxy.corp:3128'
    >>> environment_proxy("https://llm.internal/v1"), environment_proxy("http://localhost:8000/v1")
    (None, None)
    >>> del os.environ["HTTPS_PROXY"], os.environ["NO_PROXY"]
    """
    return _http_proxy(_named_proxy(url))


def socks_proxy(url: str) -> str | None:
    """The SOCKS proxy the environment names for requests to ``url`` (``ALL_PROXY=socks5://``
    and the like), or None: a proxy only httpx's own transport can use (with
    ``httpx[socks]``).

    Examples
    --------
    >>> import os
    >>> os.environ["ALL_PROXY"] = "socks5://127.0.0.1:1080"
    >>> socks_proxy("https://api.openai.com/v1")
    'socks5://127.0.0.1:1080'
    >>> del os.environ["ALL_PROXY"]
    """
    proxy = _named_proxy(url)
    if proxy is None or not httpx.URL(proxy).scheme.startswith("socks"):
        return None
    return proxy


def proxy_variables() -> dict[str, tuple[str, str]]:
    """The proxy variables set, as urllib (and so httpx) reads them: for each scheme
    (``http``, ``https``, ``all``, ``no``, ...), the variable read and its value.

    Any case of ``HTTPS_PROXY`` is read, and a lower-case one wins (an empty lower-case one
    unsets it), as :func:`urllib.request.getproxies_environment` reads them.
    """
    # One pass over the environment (read whenever a client's secrets are), then urllib's two.
    named = [(name, value) for name, value in os.environ.items() if name[-6:].lower() == "_proxy"]
    found: dict[str, tuple[str, str]] = {}
    for name, value in named:
        if value:
            found[name.lower()[:-6]] = (name, value)
    if "REQUEST_METHOD" in os.environ:  # a CGI script: urllib forgets HTTP_PROXY (httpoxy)
        found.pop("http", None)
    for name, value in named:
        if name.endswith("_proxy"):
            if value:
                found[name.lower()[:-6]] = (name, value)
            else:
                found.pop(name.lower()[:-6], None)
    return found


def check_proxy_variables() -> None:
    """Refuse a proxy variable httpx would read whose URL does not parse, naming the variable
    and what was expected, never quoting the value (which may hold a password).

    httpx and aiohttp quote a proxy URL they cannot read in their errors (``Invalid port:
    '<the password after an unescaped #>'``); this check runs first, wherever a wire reads
    the environment's proxies.

    Examples
    --------
    >>> import os
    >>> os.environ["HTTPS_PROXY"] = "http://me:pa#ss@proxy.corp:3128"
    >>> check_proxy_variables()
    Traceback (most recent call last):
    ...
    safecons.errors.InputError: HTTPS_PROXY: not a valid proxy URL: a '#' in it ...
    >>> del os.environ["HTTPS_PROXY"]
    """
    variables = proxy_variables()
    for scheme in _READ:
        if scheme in variables:
            name, value = variables[scheme]
            problem = _proxy_url_problem(value if "://" in value else f"http://{value}")
            if problem is not None:
                raise InputError(
                    f"{name}: not a valid proxy URL: {problem}; expected "
                    "http://[user:password@]host:port (or https://, socks5://, socks5h://), "
                    "with any of : @ / ? # % in the user name or password percent-encoded "
                    "(# as %23, @ as %40, / as %2F) (the value is not shown: it may hold a "
                    "password)"
                ) from None


def _proxy_url_problem(url: str) -> str | None:
    """What is wrong with a proxy URL, in words that never quote it; None if nothing."""
    if not url.isprintable() or any(c.isspace() for c in url):
        return "it holds whitespace or control characters"
    if "#" in url:
        return "a '#' in it (in a password, write it %23)"
    scheme = url.split("://", 1)[0].lower()
    if scheme not in PROXY_SCHEMES:
        return "its scheme is not one of http, https, socks5, socks5h"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number in 0-65535
        httpx.URL(url)
    except (ValueError, httpx.InvalidURL):
        return "it does not parse (a bad port, or an unescaped '/', '?' or '@')"
    if parts.query or "?" in url:
        return "a '?' in it (in a password, write it %3F)"
    if not parts.hostname:
        return "it has no host"
    return None


def proxy_secrets() -> Secrets:
    """The credentials of every proxy variable set, as secrets: the ``user:password`` of
    its URL, percent-encoded as written and decoded, the password alone, and the base64 of
    ``user:password`` that a ``Proxy-Authorization: Basic`` header carries. Read from the
    environment at each call (cheap: the secrets of a set of values are made once).

    Examples
    --------
    >>> import os
    >>> os.environ["HTTPS_PROXY"] = "http://me:s3cret%23pw@proxy.corp:3128"
    >>> proxy_secrets().scrub("407 for http://me:s3cret%23pw@proxy.corp, me:s3cret#pw")
    '407 for http://<api key>@proxy.corp, <api key>'
    >>> proxy_secrets().scrub("Proxy-Authorization: Basic bWU6czNjcmV0I3B3")
    'Proxy-Authorization: Basic <api key>'
    >>> del os.environ["HTTPS_PROXY"]
    """
    values = tuple(
        sorted(value for scheme, (_, value) in proxy_variables().items() if scheme != "no")
    )
    return _credentials(values)


@functools.lru_cache(maxsize=16)
def _credentials(values: tuple[str, ...]) -> Secrets:
    found: list[str] = []
    for value in values:
        # Up to the last '@' after the scheme, as generously as any reader could take it: a
        # URL that does not parse (an unescaped '#' or '/') still has its password scrubbed.
        userinfo, at, _ = value.split("://", 1)[-1].rpartition("@")
        if not at or not userinfo:
            continue
        user, sep, password = userinfo.partition(":")
        plain_user, plain_password = urllib.parse.unquote(user), urllib.parse.unquote(password)
        plain = f"{plain_user}{sep}{plain_password}"
        found += [userinfo, plain]
        if sep:
            found += [password, plain_password]
            # Percent-encoded as a URL library writes it back (upper-case hex, all of it).
            found.append(
                f"{urllib.parse.quote(plain_user, safe='')}:"
                f"{urllib.parse.quote(plain_password, safe='')}"
            )
        found += [base64.b64encode(form.encode()).decode() for form in {userinfo, plain}]
    return Secrets(found)


def _named_proxy(url: str) -> str | None:
    """The proxy URL the environment names for ``url``, whatever its scheme."""
    check_proxy_variables()
    target = httpx.URL(url)
    try:
        # httpx's own reading of the environment, so that every path agrees with it.
        from httpx._utils import URLPattern, get_environment_proxies
    except ImportError:  # pragma: no cover - an httpx that moved them: urllib's reading
        return _urllib_proxy(target)
    mounts = sorted(
        ((URLPattern(pattern), proxy) for pattern, proxy in get_environment_proxies().items()),
        key=lambda mount: mount[0],  # most specific first, as httpx orders its mounts
    )
    for pattern, proxy in mounts:
        if pattern.matches(target):
            return proxy
    return None


def _http_proxy(proxy: str | None) -> str | None:
    """``proxy`` when the aiohttp wire can use it (``http://``, ``https://``); a SOCKS proxy
    (``ALL_PROXY=socks5://...``) it cannot, and goes direct, once warned."""
    if proxy is None or httpx.URL(proxy).scheme in ("http", "https"):
        return proxy
    if proxy not in _WARNED:
        _WARNED.add(proxy)
        warnings.warn(
            f"a {httpx.URL(proxy).scheme} proxy is set in the environment; safecons' aiohttp "
            "wire cannot use it and goes direct (transport='httpx' with httpx[socks] can)",
            ProxyWarning,
            stacklevel=3,
        )
    return None


def _urllib_proxy(target: httpx.URL) -> str | None:
    import urllib.request

    proxies = urllib.request.getproxies_environment()
    if urllib.request.proxy_bypass_environment(target.host, proxies):  # type: ignore[attr-defined]
        return None
    return proxies.get(target.scheme) or proxies.get("all")


_WARNED: set[str] = set()
