"""Which proxy a request to a URL goes through, read from the environment as httpx reads it.

Every request a client makes (over the aiohttp wire or httpx's own transport, live or the
Batch API's) must honour ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY``
alike: behind a company proxy a request that went direct would fail, or leak past the proxy.
httpx applies them only when it makes its own transport, so the aiohttp wire asks here.
"""

from __future__ import annotations

import warnings

import httpx

__all__ = ("environment_proxy", "socks_proxy")


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


def _named_proxy(url: str) -> str | None:
    """The proxy URL the environment names for ``url``, whatever its scheme."""
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
            RuntimeWarning,
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
