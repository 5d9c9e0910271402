"""The value objects an :class:`~safecons.clients.OpenAICompatible` client takes for how its
bytes travel (:class:`TransportOptions`) and for sending its calls through a provider's Batch
API (:class:`BatchOptions`), and the reading of the keywords they replaced."""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping
from typing import Any, Final

import httpx

from ..errors import DeprecatedOptionWarning, InputError
from ._arguments import check_flag
from ._wire import TransportName

__all__ = (
    "DEFAULT_BATCH_POLL_SECONDS",
    "DEFAULT_BATCH_WAIT_SECONDS",
    "DEFAULT_HTTP_TIMEOUT",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "BatchOptions",
    "TransportOptions",
    "options_from",
)

#: The socket-level timeout of one request (seconds).
DEFAULT_HTTP_TIMEOUT: Final = 600.0
#: Default bound on one response body, after decompression: far above any chat answer (a
#: 128k-token answer is about 0.5 MB), far below what would hurt a notebook's memory.
DEFAULT_MAX_RESPONSE_BYTES: Final = 16 * 2**20
#: The least max_response_bytes may be (1 KiB): room for a chat completion's JSON envelope.
_MIN_RESPONSE_BYTES: Final = 1024
#: The longest wait between two looks at a provider batch's progress (seconds).
DEFAULT_BATCH_POLL_SECONDS: Final = 30.0
#: How long a batched client's waiting calls wait for another before they go out (seconds).
DEFAULT_BATCH_WAIT_SECONDS: Final = 2.0
_WIRES: Final = ("auto", "aiohttp", "httpx")


def _check_seconds(name: str, seconds: object, *, zero: bool = False) -> float:
    """A finite number of seconds, > 0 (``zero``: >= 0), or an error naming ``name``."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
        or (seconds == 0 and not zero)
    ):
        bound = ">= 0" if zero else "> 0"
        raise InputError(f"{name}: expected a number of seconds {bound}, got {seconds!r}")
    return float(seconds)


@dataclasses.dataclass(frozen=True, slots=True)
class TransportOptions:
    """How an :class:`~safecons.clients.OpenAICompatible` client's requests travel: every
    request of the client (live and the Batch API's) goes by the same wire, with the same
    bounds, proxies and errors.

    Parameters
    ----------
    via
        What carries the bytes. ``"auto"`` (default) is ``"aiohttp"`` on asyncio and
        ``"httpx"`` elsewhere (trio). ``"aiohttp"`` sends over one aiohttp session, without
        httpx's request and response models on the hot path (the fastest, measured in
        ``docs/performance.md``); ``"httpx"`` over httpx's own transport (SOCKS proxies with
        ``httpx[socks]``). Both honour ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and
        ``NO_PROXY`` as httpx reads them. Or any ``httpx`` async transport object
        (``httpx.MockTransport`` in tests, a transport of your own): it is used as it is.
    http_timeout
        Socket-level timeout in seconds (default 600). The per-call deadline of a run is the
        config's ``timeout_seconds``, enforced by the runner on top of this.
    max_response_bytes
        The most bytes of one response body safecons reads, after decompression (default
        16 MiB, at least 1 KiB). A larger body fails its call with an error naming this
        option and is never held whole in memory (a small gzip body can inflate to
        gigabytes).

    Examples
    --------
    >>> from safecons.clients import OpenAICompatible, TransportOptions
    >>> options = TransportOptions(via="httpx", http_timeout=30)
    >>> client = OpenAICompatible(model="m", base_url="http://localhost:8000/v1",
    ...                           transport=options)
    >>> client.transport.via, client.transport.http_timeout, client.transport.max_response_bytes
    ('httpx', 30.0, 16777216)
    >>> TransportOptions(http_timeout=0)
    Traceback (most recent call last):
    ...
    safecons.errors.InputError: http_timeout: expected a number of seconds > 0, got 0
    """

    via: TransportName | httpx.AsyncBaseTransport = "auto"
    http_timeout: float = DEFAULT_HTTP_TIMEOUT
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES

    def __post_init__(self) -> None:
        if not isinstance(self.via, httpx.AsyncBaseTransport) and self.via not in _WIRES:
            raise InputError(
                "transport: expected 'auto', 'aiohttp', 'httpx' or an httpx.AsyncBaseTransport "
                f"object, got {self.via!r}"
            )
        # Frozen: the checked values are set the way a frozen dataclass allows.
        object.__setattr__(self, "http_timeout", _check_seconds("http_timeout", self.http_timeout))
        size = self.max_response_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size < _MIN_RESPONSE_BYTES:
            raise InputError(
                f"max_response_bytes: expected a whole number of bytes >= {_MIN_RESPONSE_BYTES}, "
                f"got {size!r}"
            )


@dataclasses.dataclass(frozen=True, slots=True)
class BatchOptions:
    """How an :class:`~safecons.clients.OpenAICompatible` client sends its calls through the
    provider's Batch API (``batch=BatchOptions(...)``; ``batch=True`` is ``BatchOptions()``).

    A batched client's calls go through OpenAI's or Azure OpenAI's global Batch API instead
    of one request each: half the price, for runs that can wait up to the 24-hour completion
    window. See ``docs/batch.md``.

    Parameters
    ----------
    poll_seconds
        The longest wait between two looks at a batch's progress (default 30 s; the first
        looks come sooner: 1 s, then doubling up to this).
    wait_seconds
        How long the calls waiting to go out wait for another after the last one came before
        they are sent as a batch (default 2 s; 0 or more; never more than 60 s from the
        first). A stage's calls start together, so they go out together; a larger value
        gathers calls that come in slowly (a slow live SUT feeding a batched judge) into
        fewer batches.
    cancel_on_interrupt
        Cancel the provider's batch when the run is interrupted (Ctrl-C, a kernel interrupt).
        By default the batch is left running, and a warning names it and says how to pick it
        up.

    Examples
    --------
    >>> from safecons.clients import BatchOptions, OpenAICompatible
    >>> client = OpenAICompatible(model="m", base_url="http://localhost:8000/v1",
    ...                           batch=BatchOptions(wait_seconds=0.5))
    >>> client.batch
    BatchOptions(poll_seconds=30.0, wait_seconds=0.5, cancel_on_interrupt=False)
    >>> OpenAICompatible(model="m", base_url="http://localhost:8000/v1").batch is None
    True
    """

    poll_seconds: float = DEFAULT_BATCH_POLL_SECONDS
    wait_seconds: float = DEFAULT_BATCH_WAIT_SECONDS
    cancel_on_interrupt: bool = False

    def __post_init__(self) -> None:
        poll = _check_seconds("poll_seconds", self.poll_seconds)
        wait = _check_seconds("wait_seconds", self.wait_seconds, zero=True)
        object.__setattr__(self, "poll_seconds", poll)
        object.__setattr__(self, "wait_seconds", wait)
        check_flag("cancel_on_interrupt", self.cancel_on_interrupt)


#: The keywords OpenAICompatible took before these options, and where each went.
_MOVED: Final = {
    "http_timeout": ("transport", "TransportOptions", "http_timeout"),
    "max_response_bytes": ("transport", "TransportOptions", "max_response_bytes"),
    "batch_poll_seconds": ("batch", "BatchOptions", "poll_seconds"),
    "batch_wait_seconds": ("batch", "BatchOptions", "wait_seconds"),
    "cancel_on_interrupt": ("batch", "BatchOptions", "cancel_on_interrupt"),
}
#: The keywords only OpenAICompatible.azure used to pass, which it now sets itself.
_AZURE_ONLY: Final = frozenset(
    {"_url", "_deployment", "_auth_header", "_query", "_default_key_env"}
)


def options_from(
    transport: object, batch: object, moved: Mapping[str, object], made_by: str
) -> tuple[TransportOptions, BatchOptions | None]:
    """The client's options from its ``transport`` and ``batch`` keywords, and from the
    keywords they replaced (``moved``), which are read with a :class:`DeprecatedOptionWarning`
    for one version. Called straight from the method the user called (``made_by``), so that
    a warning points at the user's line."""
    for name in moved:
        if name in _AZURE_ONLY:
            raise TypeError(
                f"{made_by}() got an unexpected keyword argument {name!r}: an Azure OpenAI "
                "deployment's client is made with OpenAICompatible.azure(endpoint=..., "
                "deployment=..., api_version=...)"
            )
        if name not in _MOVED:
            raise TypeError(f"{made_by}() got an unexpected keyword argument {name!r}")
    if isinstance(transport, str) and transport == "direct":
        warnings.warn(
            "OpenAICompatible(transport='direct') is now transport='aiohttp' (the same wire); "
            "'direct' will stop being read in a future version",
            DeprecatedOptionWarning,
            stacklevel=3,  # the line that made the client
        )
        transport = "aiohttp"
    if not isinstance(transport, TransportOptions):
        transport = TransportOptions(via=transport)  # type: ignore[arg-type]  # checked there
    if batch is True:
        batch = BatchOptions()
    elif batch is False or batch is None:
        batch = None
    elif not isinstance(batch, BatchOptions):
        raise InputError(f"batch: expected True, False or a BatchOptions, got {batch!r}")
    if not moved:
        return transport, batch
    return _moved_options(transport, batch, moved, made_by)


def _moved_options(
    transport: TransportOptions,
    batch: BatchOptions | None,
    moved: Mapping[str, object],
    made_by: str,
) -> tuple[TransportOptions, BatchOptions | None]:
    """``transport`` and ``batch`` with the values of the keywords they replaced."""
    said = ", ".join(
        f"{name}= is now {keyword}={kind}({field}=...)"
        for name, (keyword, kind, field) in _MOVED.items()
        if name in moved
    )
    warnings.warn(
        f"{made_by}: {said}; the former keywords will stop being read in a future version",
        DeprecatedOptionWarning,
        stacklevel=4,  # the line that made the client
    )
    fields: dict[str, dict[str, Any]] = {"transport": {}, "batch": {}}
    for name, value in moved.items():
        keyword, _, field = _MOVED[name]
        fields[keyword][field] = value
    if fields["transport"]:
        transport = dataclasses.replace(transport, **fields["transport"])
    # Checked even for a client that does not batch, as they were before.
    options = dataclasses.replace(batch or BatchOptions(), **fields["batch"])
    return transport, options if batch is not None else None
