"""Faults a :class:`~safecons.testing.FakeOpenAIServer` injects, and the answer each one sends.

A :class:`Fault` says how one request fails; :class:`FaultPlan` says which request gets which
(a script of the test's, or draws from a table of probabilities); :func:`fault_response` is
the wire answer of a fault that has one (an HTTP error, a malformed body).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Final, Literal, get_args

from ..errors import SafeconsError
from ._wire import Response, error, json_bytes, seconds_header

__all__ = (
    "DEFAULT_REFUSAL",
    "DEFAULT_SLOW_DELAY",
    "FAULT_KINDS",
    "Fault",
    "FaultKind",
    "FaultPlan",
    "FaultScript",
    "FaultTable",
    "fault_response",
)

FaultKind = Literal[
    "rate_limit",
    "server_error",
    "slow",
    "content_filter_400",
    "content_filter_finish",
    "refusal",
    "malformed",
    "reset",
    "unauthorized",
    "forbidden",
    "bad_request",
    "model_not_found",
]
#: Every fault kind :class:`Fault` accepts.
FAULT_KINDS: Final[frozenset[str]] = frozenset(get_args(FaultKind))

#: Seconds a ``slow`` fault waits when it names no delay.
DEFAULT_SLOW_DELAY: Final = 1.0
#: The text of a ``refusal`` fault that names none.
DEFAULT_REFUSAL: Final = "I'm sorry, but I can't help with that request."
_DEFAULT_MALFORMED: Final = '{"id": "chatcmpl-broken", "object": "chat.completion", "choices": ['
_CONTENT_FILTER_MESSAGE: Final = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content management "
    "policy. Please modify your prompt and retry. To learn more about our content filtering "
    "policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766"
)
_FILTER_RESULT: Final[dict[str, Any]] = {
    "hate": {"filtered": False, "severity": "safe"},
    "self_harm": {"filtered": False, "severity": "safe"},
    "sexual": {"filtered": False, "severity": "safe"},
    "violence": {"filtered": True, "severity": "high"},
}
#: An HTTP status code is a three-digit integer (RFC 9110, section 15): at least 100...
_MIN_STATUS: Final = 100
#: ... and at most 599.
_MAX_STATUS: Final = 599


@dataclass(eq=True, unsafe_hash=True)
class Fault(SafeconsError):
    """A fault to inject into one request; immutable, and raisable from a responder.

    Use the convenience constructors (``Fault.rate_limit(retry_after=0.05)``, ...) rather than
    the bare class. A ``Fault`` is returned by a ``faults=`` script, used as a key of a
    ``faults=`` mapping, or raised by a responder (``raise Fault.refusal()``). It is an
    exception so that it can be raised, which is why it is not a ``frozen`` dataclass (frozen
    exceptions break ``contextlib``); its fields still cannot be reassigned.

    Parameters
    ----------
    kind
        One of :data:`FAULT_KINDS`; the wire behaviour of each:

        ``rate_limit``
            429 with OpenAI's ``rate_limit_exceeded`` error body, and ``Retry-After`` (seconds,
            possibly fractional, e.g. ``"0.05"``) and/or ``retry-after-ms`` headers for the
            fields that are set. Neither set: no retry header at all.
        ``server_error``
            500 (or ``status``: 502, 503, ...) with OpenAI's ``server_error`` body.
        ``slow``
            Waits ``delay`` seconds (default 1) on top of the latency, then answers normally,
            to push a request past a client's timeout.
        ``content_filter_400``
            400 with Azure's content-filter body (``"code": "content_filter"``,
            ``"param": "prompt"``, ``innererror.code`` ``ResponsibleAIPolicyViolation``).
        ``content_filter_finish``
            200 with ``finish_reason: "content_filter"`` and ``content`` None (or
            ``message``, as a partial answer).
        ``refusal``
            200 with ``message.refusal`` set (``message`` or a stock refusal) and ``content``
            None, OpenAI's structured-output refusal shape.
        ``malformed``
            200 (or ``status``) with ``message`` as the raw body; by default truncated JSON.
            ``Fault.malformed('{"id": "x"}')`` gives valid JSON without ``choices``.
        ``reset``
            Closes the connection with a TCP reset and no response.
        ``unauthorized`` / ``forbidden``
            401 with OpenAI's ``invalid_api_key`` body / 403 with a permission error.
        ``bad_request``
            400 ``invalid_request_error`` (non-retryable).
        ``model_not_found``
            404 with OpenAI's ``model_not_found`` body (what :func:`route_by_model` raises).
    retry_after, retry_after_ms
        ``rate_limit`` only: values of the ``Retry-After`` (seconds) and ``retry-after-ms``
        headers.
    delay
        ``slow`` only: seconds to wait.
    status
        HTTP status overriding the kind's own (``server_error`` needs a 5xx). Not allowed for
        ``slow``, ``reset``, ``refusal`` and ``content_filter_finish``, which have none.
    message
        Error message, refusal text, partial content or raw body, depending on the kind. For a
        ``slow`` fault raised by a responder (which then has no answer to give), the answer.

    Examples
    --------
    >>> Fault.rate_limit(retry_after=0.05)
    Fault(kind='rate_limit', retry_after=0.05, retry_after_ms=None, delay=None, status=None, message=None)
    >>> Fault.server_error(503).status
    503
    >>> Fault("teapot")
    Traceback (most recent call last):
    ...
    ValueError: Fault.kind: expected one of [...], got 'teapot'
    """  # noqa: E501

    kind: FaultKind
    retry_after: float | None = None
    retry_after_ms: float | None = None
    delay: float | None = None
    status: int | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(
                f"Fault.kind: expected one of {sorted(FAULT_KINDS)}, got {self.kind!r}"
            )
        for name in ("retry_after", "retry_after_ms", "delay"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int | float) or isinstance(value, bool) or not value >= 0
            ):
                raise ValueError(f"Fault.{name}: expected a number >= 0, got {value!r}")
        if self.status is not None:
            if self.kind in ("slow", "reset", "refusal", "content_filter_finish"):
                raise ValueError(f"Fault.status: a {self.kind} fault has no status of its own")
            if not isinstance(self.status, int) or not _MIN_STATUS <= self.status <= _MAX_STATUS:
                raise ValueError(f"Fault.status: expected an HTTP status, got {self.status!r}")
            if self.kind == "server_error" and not (
                HTTPStatus.INTERNAL_SERVER_ERROR <= self.status <= _MAX_STATUS
            ):
                raise ValueError(f"Fault.status: server_error needs a 5xx, got {self.status}")

    def __setattr__(self, name: str, value: Any) -> None:
        # Emulates frozen=True for the fields only: raising sets __traceback__ and friends.
        if name in _FAULT_FIELDS and name in self.__dict__:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        if name in _FAULT_FIELDS:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super().__delattr__(name)

    def __str__(self) -> str:
        return repr(self)

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle through ``args``, which a dataclass __init__ leaves empty.
        return (Fault, tuple(getattr(self, f) for f in _FAULT_FIELDS))

    @classmethod
    def rate_limit(
        cls,
        retry_after: float | None = None,
        *,
        retry_after_ms: float | None = None,
        message: str | None = None,
    ) -> Fault:
        """429 ``rate_limit_exceeded``, with the given retry headers (none when unset)."""
        return cls(
            "rate_limit", retry_after=retry_after, retry_after_ms=retry_after_ms, message=message
        )

    @classmethod
    def server_error(cls, status: int = 500, *, message: str | None = None) -> Fault:
        """A 5xx ``server_error``."""
        return cls("server_error", status=status, message=message)

    @classmethod
    def slow(cls, delay: float = DEFAULT_SLOW_DELAY, *, message: str | None = None) -> Fault:
        """Answer normally, ``delay`` seconds late."""
        return cls("slow", delay=delay, message=message)

    @classmethod
    def content_filter_400(cls, *, message: str | None = None) -> Fault:
        """400 with Azure's prompt content-filter body."""
        return cls("content_filter_400", message=message)

    @classmethod
    def content_filter_finish(cls, partial: str | None = None) -> Fault:
        """200 with ``finish_reason: "content_filter"`` and ``partial`` (None) as content."""
        return cls("content_filter_finish", message=partial)

    @classmethod
    def refusal(cls, text: str | None = None) -> Fault:
        """200 with ``message.refusal`` set and no content."""
        return cls("refusal", message=text)

    @classmethod
    def malformed(cls, body: str | None = None, *, status: int | None = None) -> Fault:
        """A response whose body is ``body`` (default: truncated JSON), not a chat completion."""
        return cls("malformed", message=body, status=status)

    @classmethod
    def reset(cls) -> Fault:
        """Close the connection (TCP reset) without a response."""
        return cls("reset")

    @classmethod
    def unauthorized(cls, *, message: str | None = None) -> Fault:
        """401 ``invalid_api_key``."""
        return cls("unauthorized", message=message)

    @classmethod
    def forbidden(cls, *, message: str | None = None) -> Fault:
        """403 permission error."""
        return cls("forbidden", message=message)

    @classmethod
    def bad_request(cls, message: str | None = None) -> Fault:
        """400 ``invalid_request_error``."""
        return cls("bad_request", message=message)

    @classmethod
    def model_not_found(cls, model: str) -> Fault:
        """404 ``model_not_found`` for ``model``."""
        return cls(
            "model_not_found",
            message=f"The model `{model}` does not exist or you do not have access to it.",
        )


_FAULT_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in dataclasses.fields(Fault))

#: ``(request_index, body) -> Fault | None``: scripts the fault of each request exactly.
FaultScript = Callable[[int, dict[str, Any]], Fault | None]
#: Fault -> probability; a key is a kind name (``str``) or a :class:`Fault`. Typed ``Any`` as
#: ``Mapping`` is invariant in its key, so no precise type accepts ``dict[str, float]``,
#: ``dict[Fault, float]`` and a literal mixing both; keys are checked when the server is built.
FaultTable = Mapping[Any, float]


class FaultPlan:
    """Which fault each chat-completions request gets, from a server's ``faults=`` argument.

    A script is called with each request's index; a table is drawn from, one number
    ``u = rng.random()`` a request from ``random.Random(seed)``, the request getting the first
    fault whose cumulative probability exceeds ``u``. :meth:`draw` takes the next index and
    number (under the server's lock, in arrival order); :meth:`pick` runs the script, which is
    the test's own code, outside it.

    Examples
    --------
    >>> plan = FaultPlan({"rate_limit": 1.0}, seed=0)
    >>> plan.pick(*plan.draw(), body={}).kind
    'rate_limit'
    """

    def __init__(self, faults: FaultTable | FaultScript | None, seed: int | None) -> None:
        self._script: FaultScript | None = None
        self._table: list[tuple[Fault, float]] = []
        if callable(faults):
            self._script = faults
        elif faults is not None:
            self._table = self._parse_table(faults)
        self._seed = seed
        self.restart()

    @staticmethod
    def _parse_table(faults: FaultTable) -> list[tuple[Fault, float]]:
        table: list[tuple[Fault, float]] = []
        for key, p in faults.items():
            if not isinstance(key, str | Fault):
                raise TypeError(f"faults: expected kind names or Fault keys, got {key!r}")
            fault = key if isinstance(key, Fault) else Fault(key)  # type: ignore[arg-type]
            if not isinstance(p, int | float) or isinstance(p, bool) or not 0 <= p <= 1:
                raise ValueError(f"faults[{key!r}]: expected a probability in [0, 1], got {p!r}")
            table.append((fault, float(p)))
        total = sum(p for _, p in table)
        if total > 1 + 1e-9:
            raise ValueError(f"faults: probabilities add up to {total:g}, more than 1")
        return table

    def restart(self) -> None:
        """Count requests from 0 again and draw again from ``seed``."""
        self._index = 0
        self._rng = random.Random(self._seed)

    def draw(self) -> tuple[int, float]:
        """The next request's index and number (the caller holds the server's lock)."""
        index = self._index
        self._index += 1
        return index, self._rng.random() if self._table else 1.0

    def pick(self, index: int, u: float, body: dict[str, Any]) -> object:
        """The fault of the request ``draw`` gave ``index`` and ``u``: a :class:`Fault` or
        None, or whatever a script returned (the server names a wrong one)."""
        if self._script is not None:
            return self._script(index, body)
        cumulative = 0.0
        for fault, p in self._table:
            cumulative += p
            if u < cumulative:
                return fault
        return None


def fault_response(fault: Fault) -> Response:
    """The answer of a fault that is an HTTP answer of its own (not slow, reset, refusal...)."""
    kind = fault.kind
    if kind == "rate_limit":
        headers = []
        wait = "a moment"
        if fault.retry_after is not None:
            headers.append(("retry-after", seconds_header(fault.retry_after)))
            wait = f"{fault.retry_after:g}s"
        if fault.retry_after_ms is not None:
            headers.append(("retry-after-ms", seconds_header(fault.retry_after_ms)))
            wait = f"{fault.retry_after_ms:g}ms"
        message = fault.message or (
            "Rate limit reached for requests per min (RPM) on this fake server. "
            f"Please try again in {wait}."
        )
        return error(
            fault.status or 429,
            message,
            type_="requests",
            code="rate_limit_exceeded",
            headers=headers,
        )
    if kind == "server_error":
        message = fault.message or (
            "The server had an error while processing your request. Sorry about that!"
        )
        return error(fault.status or 500, message, type_="server_error")
    if kind == "content_filter_400":
        status = fault.status or 400
        body = {
            "error": {
                "message": fault.message or _CONTENT_FILTER_MESSAGE,
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": status,
                "innererror": {
                    "code": "ResponsibleAIPolicyViolation",
                    "content_filter_result": _FILTER_RESULT,
                },
            }
        }
        return Response(status, json_bytes(body))
    if kind == "malformed":
        raw = _DEFAULT_MALFORMED if fault.message is None else fault.message
        return Response(fault.status or 200, raw.encode())
    if kind == "unauthorized":
        message = fault.message or (
            "Incorrect API key provided. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        )
        return error(fault.status or 401, message, code="invalid_api_key")
    if kind == "forbidden":
        message = fault.message or "You are not allowed to sample from this model."
        return error(fault.status or 403, message, code="permission_denied")
    if kind == "bad_request":
        message = fault.message or "Invalid request: the fake server was told to reject it."
        return error(fault.status or 400, message)
    if kind == "model_not_found":
        message = fault.message or "The model does not exist or you do not have access to it."
        return error(fault.status or 404, message, code="model_not_found", param="model")
    raise AssertionError(f"no error response for fault kind {kind!r}")  # pragma: no cover
