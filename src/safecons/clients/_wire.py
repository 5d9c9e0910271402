"""One HTTP stack: the wire every request of an :class:`~safecons.OpenAICompatible` client goes
by, live calls and the Batch API's alike.

A :class:`Wire` sends a request and hands back its status, headers and body as *raw* chunks
inflated here, under a bound (a small gzip body can inflate to gigabytes), whichever library
carries the bytes. Two carry them, behind the same methods, the same bounds, the same proxies
and the same errors (:class:`WireError`):

- :class:`AiohttpWire`, on asyncio (the default): one ``aiohttp`` session, without httpx's
  request and response models on the hot path (measured in ``docs/performance.md``: httpx's
  models over the ``httpx-aiohttp`` transport cost 0.89-0.92 of a bare aiohttp loop, this
  wire 0.97-1.01). ``HTTPS_PROXY``, ``HTTP_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` are read
  as httpx reads them (:func:`~safecons.clients._proxy.environment_proxy`).
- :class:`HttpxWire`: an ``httpx.AsyncClient`` over httpx's own transport (trio, where
  aiohttp does not run; SOCKS proxies with ``httpx[socks]``) or any httpx transport the user
  gives (``httpx.MockTransport`` in tests, a transport of their own).
"""

from __future__ import annotations

import errno
import importlib.util
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

import anyio
import httpx

from .._tasks import in_asyncio_loop
from .._text import valid_unicode
from ..errors import ConfigError, SafeconsError
from ._proxy import environment_proxy, socks_proxy

try:  # a core dependency; an import that fails leaves the httpx wire, which needs none
    import aiohttp
except ImportError:  # pragma: no cover - only without the core dependencies
    aiohttp = None  # type: ignore[assignment]

__all__ = (
    "MAX_CONNECTIONS",
    "PIECE_BYTES",
    "AiohttpWire",
    "HttpxWire",
    "Inflater",
    "Reply",
    "Streamed",
    "TransportName",
    "Upload",
    "Wire",
    "WireError",
    "check_encoding",
    "cut",
    "inflated",
    "open_wire",
    "read_all",
    "refused",
    "send",
)

#: Connections one wire keeps open: twice the most a run may have in flight (64), so a
#: connection that is closing never makes an attempt wait for a socket.
MAX_CONNECTIONS: Final = 128
#: The most bytes one inflation step makes: what a body costs in memory beyond its bound.
PIECE_BYTES: Final = 256 * 2**10
#: A zlib stream's header (CMF and FLG, RFC 1950): the bytes that tell zlib-wrapped deflate
#: from raw deflate.
_ZLIB_HEADER: Final = 2
#: The first bytes of a gzip member (RFC 1952): what may follow one member.
_GZIP_MAGIC: Final = b"\x1f\x8b"
#: Encodings a request asks for: those :class:`Inflater` inflates under a bound.
ACCEPT_ENCODING: Final = "gzip, deflate"
_MAX_DETAIL: Final = 300

TransportName = Literal["auto", "aiohttp", "httpx"]
#: The headers of a request whose body is JSON.
_JSON: Final = {"content-type": "application/json"}


class WireError(SafeconsError):
    """A request that got no readable answer. Its text is the client's to prefix with who it
    is; it holds nothing the client sends (scrubbed).

    ``kind`` says what went wrong: ``"refused"`` (nothing listens there), ``"connect"``,
    ``"timeout"``, ``"connection"`` (a reset, a protocol error), ``"encoding"`` (a body that is
    not what its ``Content-Encoding`` says) or ``"too large"`` (above the reader's bound).
    """

    def __init__(
        self,
        message: str,
        kind: Literal["refused", "connect", "timeout", "connection", "encoding", "too large"],
    ) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole answer: status, headers (case-insensitive) and the inflated body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Streamed:
    """An answer whose body is still arriving: ``chunks`` as they come, inflated when the
    body is compressed (then at most :data:`PIECE_BYTES` each, whatever a chunk inflates
    to)."""

    status: int
    headers: Mapping[str, str]
    chunks: AsyncIterator[bytes]


@dataclass(frozen=True, slots=True)
class Upload:
    """A ``multipart/form-data`` body: text ``fields`` and one file (the Batch API's upload)."""

    fields: Mapping[str, str]
    field: str
    filename: str
    data: bytes
    content_type: str


#: A request's body: JSON already encoded, a form with a file, or none.
Body = bytes | Upload | None


class Wire(Protocol):
    """What a client's session sends its requests by."""

    def stream(
        self, method: str, url: str, *, params: Mapping[str, str] | None = None, body: Body = None
    ) -> AbstractAsyncContextManager[Streamed]:
        """The answer to one request, its body read as the block iterates ``chunks``."""
        ...

    async def fetch(
        self,
        method: str,
        url: str,
        *,
        limit: int,
        params: Mapping[str, str] | None = None,
        body: Body = None,
    ) -> Reply:
        """One request's whole answer, as :func:`send` reads it."""
        ...


async def send(
    wire: Wire,
    method: str,
    url: str,
    *,
    limit: int,
    params: Mapping[str, str] | None = None,
    body: Body = None,
) -> Reply:
    """One request's whole answer, its body at most ``limit`` bytes after inflation (a larger
    one is a :class:`WireError` of kind ``"too large"``, never held whole in memory)."""
    return await wire.fetch(method, url, limit=limit, params=params, body=body)


async def _streamed(
    wire: Wire,
    method: str,
    url: str,
    *,
    limit: int,
    params: Mapping[str, str] | None,
    body: Body,
) -> Reply:
    """:meth:`Wire.fetch` by the wire's :meth:`~Wire.stream`."""
    async with wire.stream(method, url, params=params, body=body) as answer:
        data = await read_all(answer.chunks, limit)
    return Reply(answer.status, answer.headers, data)


async def read_all(
    chunks: AsyncIterator[bytes],
    limit: int,
    refuse: Callable[[int], WireError] | None = None,
) -> bytes:
    """Every chunk of a body, refusing to hold more than ``limit`` bytes (``refuse`` says
    so; by default as a client's ``max_response_bytes``)."""
    body = bytearray()
    async for piece in chunks:
        body += piece
        if len(body) > limit:
            raise (refuse or too_large)(limit)
    return bytes(body)


def too_large(limit: int) -> WireError:
    return WireError(
        f"response body is larger than max_response_bytes={limit:,} bytes (after "
        "decompression); raise it with OpenAICompatible(transport=TransportOptions("
        "max_response_bytes=...)) if "
        "the endpoint really sends answers this long",
        "too large",
    )


@asynccontextmanager
async def open_wire(
    transport: TransportName | httpx.AsyncBaseTransport,
    *,
    url: str,
    headers: Mapping[str, str],
    timeout: float,
    scrub: Callable[[str], str],
) -> AsyncIterator[Wire]:
    """The wire a session sends by, for as long as the block lasts.

    ``"auto"`` is :class:`AiohttpWire` on asyncio and :class:`HttpxWire` over httpx's own
    transport elsewhere (trio); ``"aiohttp"`` and ``"httpx"`` ask for one; an httpx transport
    object is used as it is, by :class:`HttpxWire`. Where the environment names a SOCKS
    proxy for ``url`` (the client's base URL), ``"auto"`` is httpx's own transport, the one
    that can use it (with ``httpx[socks]``; without it, a :class:`ConfigError` says so), and
    ``"aiohttp"`` a :class:`ConfigError`: never around the proxy. A ``Content-Type`` in
    ``headers`` is not sent: each request says its own body's.
    """
    headers = {k: v for k, v in headers.items() if k.lower() != "content-type"}
    if transport == "aiohttp" and not in_asyncio_loop():
        raise ConfigError(
            "transport='aiohttp' runs on asyncio only; under another event loop (trio) use "
            "transport='auto' or 'httpx'"
        )
    socks = None if isinstance(transport, httpx.AsyncBaseTransport) else socks_proxy(url)
    if socks is not None:
        # Only httpx's own transport speaks SOCKS: going around a proxy the environment
        # names would leak what it is there to guard, prompts and keys included.
        if transport == "aiohttp":
            raise ConfigError(
                f"the environment names a SOCKS proxy for {httpx.URL(url).host} "
                f"({httpx.URL(socks).scheme}), which transport='aiohttp' cannot use: use "
                "transport='auto' or 'httpx' (with pip install 'httpx[socks]')"
            )
        if importlib.util.find_spec("socksio") is None:
            raise ConfigError(
                f"the environment names a SOCKS proxy for {httpx.URL(url).host} "
                f"({httpx.URL(socks).scheme}): safecons sends through it with httpx's SOCKS "
                "support: pip install 'httpx[socks]'"
            )
        transport = "httpx"
    if transport == "aiohttp" or (transport == "auto" and in_asyncio_loop()):
        async with AiohttpWire.open(headers=headers, timeout=timeout, scrub=scrub) as wire:
            yield wire
        return
    given = transport if isinstance(transport, httpx.AsyncBaseTransport) else None
    async with HttpxWire.open(given, headers=headers, timeout=timeout, scrub=scrub) as wire:
        yield wire


class AiohttpWire:
    """Requests over one ``aiohttp`` session: bodies arrive still encoded
    (``auto_decompress=False``) and are inflated by :class:`Inflater` under the reader's
    bound; the proxy of each URL is the environment's, read as httpx reads it."""

    def __init__(self, session: Any, scrub: Callable[[str], str]) -> None:
        self._session = session
        self._scrub = scrub
        self._proxies: dict[str, str | None] = {}

    @classmethod
    @asynccontextmanager
    async def open(
        cls, *, headers: Mapping[str, str], timeout: float, scrub: Callable[[str], str]
    ) -> AsyncIterator[AiohttpWire]:
        if aiohttp is None:  # pragma: no cover
            raise ImportError("safecons' HTTP wire needs aiohttp: pip install aiohttp")
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS, limit_per_host=0),
            timeout=aiohttp.ClientTimeout(total=timeout),
            headers=dict(headers),
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding",),
        ) as session:
            yield cls(session, scrub)

    def _proxy(self, url: str) -> str | None:
        origin = url.split("/", 3)[2] if "://" in url else url
        if origin not in self._proxies:
            self._proxies[origin] = environment_proxy(url)
        return self._proxies[origin]

    async def fetch(
        self,
        method: str,
        url: str,
        *,
        limit: int,
        params: Mapping[str, str] | None = None,
        body: Body = None,
    ) -> Reply:
        """One request's whole answer (:func:`send`). A body sent as it is (no
        ``Content-Encoding``, every answer of a server that does not compress) is read here
        chunk by chunk under the same bound, without the async generators a stream's chunks
        pass through; any other goes by :meth:`stream` and :class:`Inflater`."""
        if isinstance(body, Upload):
            return await _streamed(self, method, url, limit=limit, params=params, body=body)
        opened = False  # what fails once the answer is open is said as stream's reading says it
        try:
            async with self._session.request(
                method,
                url,
                data=body,
                params=params or None,
                headers=None if body is None else _JSON,
                allow_redirects=False,
                proxy=self._proxy(url),
            ) as response:
                opened = True
                headers = response.headers
                encoding = headers.get("content-encoding")
                if encoding:
                    raw = self._chunks(response)
                    data = await read_all(inflated(encoding, raw, self._scrub), limit)
                else:
                    data = await self._plain(response.content, limit)
                return Reply(response.status, headers, data)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            if opened:
                raise
            raise self._error(exc) from None

    async def _plain(self, content: Any, limit: int) -> bytes:
        """A body sent as it is, at most ``limit`` bytes (:func:`read_all`'s bound); a
        failure of the carrier while it arrives is the wire's (as :func:`_guarded` says it)."""
        chunks: list[bytes] = []
        size = 0
        try:
            # The body's end is seen with its last chunk: no read is made to be told so.
            while not content.at_eof():
                chunk = await content.readany()
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise too_large(limit)
                chunks.append(chunk)
        except self._carrier_failures() as exc:
            raise self._error(exc) from None
        return b"".join(chunks)

    @staticmethod
    def _carrier_failures() -> tuple[type[BaseException], ...]:
        """What the carrier raises while a body arrives (then the wire's :meth:`_error`)."""
        return (aiohttp.ClientError, OSError, TimeoutError)

    def _chunks(self, response: Any) -> AsyncIterator[bytes]:
        """The body's chunks as they arrive, still encoded; a failure of the carrier is the
        wire's (:func:`_guarded`)."""
        return _guarded(response.content.iter_any(), self._carrier_failures(), self._error)

    @asynccontextmanager
    async def stream(
        self, method: str, url: str, *, params: Mapping[str, str] | None = None, body: Body = None
    ) -> AsyncIterator[Streamed]:
        data: Any = body
        headers = None
        if isinstance(body, Upload):
            data = aiohttp.FormData()
            for name, value in body.fields.items():
                data.add_field(name, value)
            data.add_field(
                body.field, body.data, filename=body.filename, content_type=body.content_type
            )
        elif body is not None:
            headers = _JSON
        opened = False  # what fails once the block runs is the block's, or _guarded's
        try:
            async with self._session.request(
                method,
                url,
                data=data,
                params=params or None,
                headers=headers,
                allow_redirects=False,
                proxy=self._proxy(url),
            ) as response:
                opened = True
                raw = self._chunks(response)
                chunks = inflated(response.headers.get("content-encoding", ""), raw, self._scrub)
                yield Streamed(response.status, response.headers, chunks)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            if opened:
                raise
            raise self._error(exc) from None

    def _error(self, exc: BaseException) -> WireError:
        if (known := _known(exc)) is not None:
            return known
        if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
            return WireError(f"timed out ({type(exc).__name__})", "timeout")
        if isinstance(exc, aiohttp.ClientHttpProxyError):
            # aiohttp's own text quotes the proxy's URL, user name and password included:
            # said here from the status alone, as httpx says it.
            said = cut(self._scrub(f"{exc.status} {exc.message}"))
            return WireError(f"connection error (the proxy answered {said})", "connection")
        return WireError(
            f"connection error ({type(exc).__name__}: {self._detail(exc)})", "connection"
        )

    def _detail(self, exc: BaseException) -> str:
        return cut(self._scrub(str(exc))) or "no detail"


class HttpxWire:
    """Requests over an ``httpx.AsyncClient``: httpx's own transport (which reads the proxies
    from the environment itself), or the transport given. Bodies are read raw and inflated by
    :class:`Inflater`, as on :class:`AiohttpWire`."""

    def __init__(
        self, http: httpx.AsyncClient, scrub: Callable[[str], str], timeout: float
    ) -> None:
        self._http = http
        self._scrub = scrub
        self._timeout = timeout

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        transport: httpx.AsyncBaseTransport | None,
        *,
        headers: Mapping[str, str],
        timeout: float,
        scrub: Callable[[str], str],
    ) -> AsyncIterator[HttpxWire]:
        limits = httpx.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
        )
        async with httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(timeout),
            headers=dict(headers),
            limits=limits,
            follow_redirects=False,
        ) as http:
            yield cls(http, scrub, timeout)

    async def fetch(
        self,
        method: str,
        url: str,
        *,
        limit: int,
        params: Mapping[str, str] | None = None,
        body: Body = None,
    ) -> Reply:
        """One request's whole answer (:func:`send`), read by :meth:`stream`."""
        return await _streamed(self, method, url, limit=limit, params=params, body=body)

    @asynccontextmanager
    async def stream(
        self, method: str, url: str, *, params: Mapping[str, str] | None = None, body: Body = None
    ) -> AsyncIterator[Streamed]:
        kwargs: dict[str, Any] = {}
        if isinstance(body, Upload):
            kwargs["data"] = dict(body.fields)
            kwargs["files"] = {body.field: (body.filename, body.data, body.content_type)}
        elif body is not None:
            kwargs["content"] = body
            kwargs["headers"] = {"content-type": "application/json"}
        opened = False
        try:
            async with self._http.stream(method, url, params=params or None, **kwargs) as response:
                opened = True
                encoding = response.headers.get("content-encoding", "")
                if response.is_stream_consumed:
                    # A response built in memory (httpx.MockTransport) was read, and
                    # inflated by httpx, on creation.
                    check_encoding(encoding, self._scrub)
                    raw: AsyncIterator[bytes] = _once(response.content)
                    encoding = ""
                else:
                    # httpx's timeout bounds each read; the wire's bounds the whole answer,
                    # as aiohttp's total timeout does.
                    raw = _guarded(
                        response.aiter_raw(),
                        (httpx.HTTPError, OSError, TimeoutError),
                        self._error,
                        within=self._timeout,
                    )
                chunks = inflated(encoding, raw, self._scrub)
                yield Streamed(response.status_code, response.headers, chunks)
        except (httpx.HTTPError, httpx.InvalidURL, OSError, TimeoutError, ValueError) as exc:
            if opened:
                raise
            raise self._error(exc) from None

    def _error(self, exc: BaseException) -> WireError:
        if (known := _known(exc)) is not None:
            return known
        detail = f"{type(exc).__name__}: {cut(self._scrub(str(exc))) or 'no detail'}"
        if isinstance(exc, httpx.ConnectTimeout):
            return WireError(f"connection failed or timed out ({detail})", "connect")
        if isinstance(exc, httpx.ConnectError):
            return WireError(f"connection error ({detail})", "connect")
        if isinstance(exc, httpx.TimeoutException | TimeoutError):
            return WireError(f"timed out ({type(exc).__name__})", "timeout")
        return WireError(f"connection error ({detail})", "connection")


def _known(exc: BaseException) -> WireError | None:
    """What every carrier says alike of a failure: the wire's own, or a refused connection."""
    if isinstance(exc, WireError):
        return exc
    if refused(exc):
        return WireError("connection refused", "refused")
    return None


async def _guarded(
    raw: AsyncIterator[bytes],
    failures: tuple[type[BaseException], ...],
    error: Callable[[BaseException], WireError],
    *,
    within: float | None = None,
) -> AsyncIterator[bytes]:
    """``raw``'s chunks; a failure of the carrier while the body arrives is the wire's, said
    as one (what the block that reads them raises is its own, and passes untouched). With
    ``within``, a body still arriving that many seconds after the request began is cut off
    (a carrier whose own timeout bounds each read only: a trickle would never end)."""
    deadline = None if within is None else anyio.current_time() + within
    try:
        async for chunk in raw:
            if deadline is not None and anyio.current_time() > deadline:
                raise WireError(
                    f"timed out (the answer took more than {within:g} s: http_timeout)",
                    "timeout",
                )
            yield chunk
    except failures as exc:
        raise error(exc) from None


async def _once(data: bytes) -> AsyncIterator[bytes]:
    if data:
        yield data


def refused(exc: BaseException) -> bool:
    """Whether a connection failure was a plain refusal (no server at that port)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError) or (
            isinstance(current, OSError) and current.errno == errno.ECONNREFUSED
        ):
            return True
        os_error = getattr(current, "os_error", None)  # aiohttp's ClientConnectorError
        if isinstance(os_error, ConnectionRefusedError):
            return True
        current = current.__cause__ or current.__context__
    return False


def check_encoding(header: str, scrub: Callable[[str], str]) -> list[str]:
    """The layers of a ``Content-Encoding`` header; one of gzip or deflate at most."""
    header = scrub(header)
    layers = [e.strip().lower() for e in header.split(",") if e.strip()]
    layers = [e for e in layers if e != "identity"]
    if len(layers) > 1 or any(e not in ("gzip", "x-gzip", "deflate") for e in layers):
        raise WireError(
            f"response has Content-Encoding {cut(header, 60)!r}; safecons asks for and reads "
            "one layer of gzip or deflate only",
            "encoding",
        )
    return layers


async def inflated(
    encoding: str, raw: AsyncIterator[bytes], scrub: Callable[[str], str]
) -> AsyncIterator[bytes]:
    """A body's chunks inflated as its ``Content-Encoding`` says, at most
    :data:`PIECE_BYTES` each, whatever a chunk inflates to."""
    layers = check_encoding(encoding, scrub)
    if not layers:
        async for chunk in raw:
            yield chunk
        return
    inflater = Inflater(layers[0])
    received = False
    try:
        async for chunk in raw:
            received = received or bool(chunk)
            for piece in inflater.pieces(chunk):
                yield piece
        if received:  # an empty body is empty, whatever its header
            for piece in inflater.finish():
                yield piece
    except zlib.error as exc:
        raise WireError(
            f"response body is not valid {layers[0]} data (its Content-Encoding): {exc}",
            "encoding",
        ) from None


class Inflater:
    """Bounded decompression of a gzip or deflate body.

    ``zlib``'s ``max_length`` bounds each step's output, so a small body that inflates to
    gigabytes (a "gzip bomb") is handed on in pieces of at most ``piece`` bytes, never
    inflated whole. A gzip body of several members is read whole, as ``gzip.decompress``
    reads it; bytes after the last member that begin no other (padding, a newline) are
    ignored, as httpx ignores them; a body that ends before its compressed stream does is an
    error, not a shorter answer.

    Examples
    --------
    >>> import gzip
    >>> inflater = Inflater("gzip", piece=4)
    >>> list(inflater.pieces(gzip.compress(b"refused")))
    [b'refu', b'sed']
    >>> list(inflater.finish())
    []
    """

    def __init__(self, encoding: str, piece: int = PIECE_BYTES) -> None:
        self._gzip = encoding in ("gzip", "x-gzip")
        self._piece = piece
        self._zlib = self._new()
        # "deflate" is meant to be zlib-wrapped, but some servers send raw deflate; which one
        # it is can be told from the first two bytes.
        self._undecided = not self._gzip
        self._head = b""
        self._rest = b""  # what followed the last member's end, not yet read
        self._trailing = False  # past the last stream: the rest is ignored

    def _new(self, wbits: int | None = None) -> Any:
        return zlib.decompressobj(
            wbits if wbits is not None else zlib.MAX_WBITS | 16 if self._gzip else zlib.MAX_WBITS
        )

    def _decide(self, data: bytes) -> bytes:
        self._head += data
        if len(self._head) < _ZLIB_HEADER:
            return b""
        data, self._head, self._undecided = self._head, b"", False
        try:
            zlib.decompressobj().decompress(data[:_ZLIB_HEADER])
        except zlib.error:
            self._zlib = self._new(-zlib.MAX_WBITS)
        return data

    def pieces(self, data: bytes) -> Iterator[bytes]:
        """``data`` inflated, in pieces of at most ``piece`` bytes."""
        if self._trailing:
            return  # past the last stream: what follows is not read
        if self._undecided:
            data = self._decide(data)
            if self._undecided:
                return
        while True:
            if self._zlib.eof:
                rest, self._rest = self._rest + data, b""
                if not self._gzip:
                    self._trailing = True  # bytes after a deflate stream, ignored as httpx does
                    return
                if len(rest) < len(_GZIP_MAGIC) and _GZIP_MAGIC.startswith(rest):
                    self._rest = rest  # nothing yet, or what may begin the next member
                    return
                if not rest.startswith(_GZIP_MAGIC):
                    # Padding or a stray newline after the last member: ignored, as httpx
                    # and gzip.decompress (zeros) do, not a reason to lose the answer.
                    self._trailing = True
                    return
                self._zlib, data = self._new(), rest  # the next gzip member
            chunk = self._zlib.decompress(data, self._piece)
            # At a stream's end zlib keeps what follows it as unused_data *and* as
            # unconsumed_tail: it is taken from the first alone, once.
            before = data
            if self._zlib.eof:
                data, self._rest = b"", self._zlib.unused_data
            else:
                data = self._zlib.unconsumed_tail
            if chunk:
                yield chunk
            elif not self._zlib.eof and (not data or data == before):
                return

    def finish(self) -> Iterator[bytes]:
        """Whatever the stream still holds at its end."""
        if self._undecided and self._head:
            self._undecided = False  # a one-byte body: let zlib say what it makes of it
            data, self._head = self._head, b""
            yield from self.pieces(data)
        else:
            yield from self.pieces(b"")
        if not self._zlib.eof:
            raise zlib.error("the body ends before its compressed stream does")


def cut(text: str, limit: int = _MAX_DETAIL) -> str:
    """A server's text as a message quotes it: valid Unicode, at most about ``limit``
    characters, its middle cut out (a provider says what went wrong first and why last: "The
    model `x` does not exist").

    Examples
    --------
    >>> cut("Invalid request: " + "x" * 400 + " the model `gpt-x` does not exist.", 60)
    'Invalid request: xxxxxxxxxxx … model `gpt-x` does not exist.'
    """
    # Every server text that reaches a message passes here: made valid Unicode too, so that an
    # error raised out of a run (an AuthenticationError) can be printed or logged.
    text = valid_unicode(text)
    if len(text) <= limit:
        return text
    head = max(1, (limit - 3) // 2)
    return f"{text[:head]} … {text[len(text) - (limit - 3 - head) :]}"
