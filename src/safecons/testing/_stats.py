"""What a :class:`~safecons.testing.FakeOpenAIServer` counts and records: each request, and a
snapshot of the whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ._batch_server import BatchStats

__all__ = (
    "DEFAULT_RECORDED_HEADERS",
    "SECRET_HEADERS",
    "Record",
    "RequestRecord",
    "ServerStats",
)

#: Request headers kept in :attr:`RequestRecord.headers` unless ``record_headers`` says otherwise.
DEFAULT_RECORDED_HEADERS: Final[tuple[str, ...]] = (
    "accept",
    "content-type",
    "openai-organization",
    "openai-project",
    "user-agent",
    "x-request-id",
)
# Credentials are never recorded, whatever the caller asks for.
SECRET_HEADERS: Final[frozenset[str]] = frozenset(
    {"authorization", "api-key", "proxy-authorization", "cookie", "x-api-key"}
)


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server received it.

    Attributes
    ----------
    index
        Arrival order among all requests since start (or :meth:`FakeOpenAIServer.reset_stats`).
    method, path, query
        Request method, path and raw query string (``"api-version=2024-10-21"``).
    headers
        The recorded headers (lower-case names, see ``record_headers``); never credentials.
    auth_header
        Which credential header was present - ``"authorization"``, ``"api-key"`` or None. The
        value itself is never stored.
    body
        The parsed JSON body (None when absent or not JSON).
    model
        ``body["model"]`` when it is a string.
    status
        Status sent back; None while in flight or when the connection was reset.
    fault
        Kind of the fault applied, if any.
    error
        What the responder raised, when it raised something other than a :class:`Fault`.
    """

    index: int
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    auth_header: str | None
    body: Any
    model: str | None
    status: int | None = None
    fault: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ServerStats:
    """A snapshot of a server's statistics (see :attr:`FakeOpenAIServer.stats`).

    Attributes
    ----------
    requests
        Every HTTP request received, on any path.
    connections
        TCP connections accepted: with keep-alive, far fewer than ``requests``.
    requests_by_model
        Chat-completions requests with a JSON-object body, by ``body["model"]`` (None when the
        body has none, e.g. Azure clients that name only the deployment), whatever their
        outcome.
    temperatures
        For the same requests, ``body["temperature"]`` in arrival order, by model; None when
        the request carried no (numeric) temperature.
    in_flight
        Requests being handled now.
    max_in_flight
        The most requests ever handled at once.
    faults
        Faults applied, by kind (including those raised by the responder).
    statuses
        Responses sent, by HTTP status.
    log
        The most recent requests (up to ``log_size``), oldest first.
    rate_limited
        Requests the server's ``rate_limit`` answered 429 (injected faults are in ``faults``).
    batch
        What the Batch API did: files uploaded, batches created, lines answered, cancels (a
        :class:`~safecons.testing._batch_server.BatchStats`).
    """

    requests: int
    connections: int
    requests_by_model: dict[str | None, int]
    temperatures: dict[str | None, list[float | None]]
    in_flight: int
    max_in_flight: int
    faults: dict[str, int]
    statuses: dict[int, int]
    log: tuple[RequestRecord, ...]
    rate_limited: int = 0
    batch: BatchStats = field(default_factory=BatchStats)


class Record:
    """A request being handled: a :class:`RequestRecord` still filled in."""

    __slots__ = (
        "auth_header",
        "body",
        "error",
        "fault",
        "headers",
        "index",
        "method",
        "model",
        "path",
        "query",
        "stage",
        "status",
    )

    def __init__(
        self,
        *,
        index: int,
        method: str,
        path: str,
        query: str,
        headers: dict[str, str],
        auth_header: str | None,
    ) -> None:
        self.index = index
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.auth_header = auth_header
        self.body: Any = None
        self.model: str | None = None
        self.status: int | None = None
        self.fault: str | None = None
        self.error: str | None = None
        # Whose code runs now ("responder", "fault script"), to name it if it raises.
        self.stage: str | None = None

    def freeze(self) -> RequestRecord:
        return RequestRecord(
            index=self.index,
            method=self.method,
            path=self.path,
            query=self.query,
            headers=dict(self.headers),
            auth_header=self.auth_header,
            body=self.body,
            model=self.model,
            status=self.status,
            fault=self.fault,
            error=self.error,
        )
