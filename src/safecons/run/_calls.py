"""One value for "a model call", with the one cache key the run, the dry run and the cache share.

A :class:`ModelCall` is built once per call, by whoever knows what the call asks (the metric's
SUT samples, a judge's comparison, a swap test's ordering), and everything downstream reads it:
the session sends its messages, the runner keys the cache with :attr:`ModelCall.key`, and
:func:`~safecons.planned_calls` builds the same values to look them up without sending any. So
the dry run cannot drift from the run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .._ids import id_key
from ..clients import ChatClient, Completion
from ..clients._internal import request_fingerprint
from ._cache import cache_key

__all__ = (
    "CallKind",
    "Endpoint",
    "ModelCall",
    "decode_completion",
    "encode_completion",
    "row_draw",
    "sample_seed",
    "slot",
)

CallKind = Literal["sut", "judge", "pairwise"]


def slot(input_id: object, index: int) -> str:
    """Which row and sample a call belongs to, as part of its cache key.

    Identical requests in two slots are cached apart: a provider is not deterministic even at
    temperature 0, and a rerun must replay each slot's own answer.
    """
    return f"{id_key(input_id).decode('utf-8', 'surrogatepass')}#{index}"


def sample_seed(seed: int, input_id: object, index: int) -> int:
    """A 31-bit seed for one SUT sample, from the run's seed, the row's id and the index.

    31 bits because some servers store the request seed in a signed 32-bit integer.

    Examples
    --------
    >>> sample_seed(0, 7, 1) == sample_seed(0, 7, 1) != sample_seed(0, 7, 2)
    True
    """
    return row_draw(seed, input_id, index, person=b"sc-sample") >> 33


def row_draw(seed: int, input_id: object, index: int, *, person: bytes) -> int:
    """A 64-bit number fixed by the run's seed, the row's id and a sample's index (never by
    the row's place in the frame); ``person`` keeps draws of different purposes apart.

    Examples
    --------
    >>> row_draw(0, "a", 1, person=b"x") == row_draw(0, "a", 1, person=b"x")
    True
    >>> row_draw(0, "a", 1, person=b"x") != row_draw(0, "a", 1, person=b"y")
    True
    """
    h = hashlib.blake2b(digest_size=8, person=person)
    h.update(str(seed).encode())
    h.update(b"\x00")
    h.update(id_key(input_id))
    h.update(b"\x00")
    h.update(str(index).encode())
    return int.from_bytes(h.digest(), "big")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Who answers a call: the client's identity (URL and model, never a key) and what else
    shapes its answers (query string, extra params, whether temperature and seed are sent,
    extra headers; a callable's name and version)."""

    identity: str
    request: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, client: ChatClient) -> Endpoint:
        return cls(client.identity, request_fingerprint(client))


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call: what is asked of which endpoint, for which row and sample.

    ``seed`` is the SUT sample's seed (part of a SUT call's key); judges and swap tests run at
    temperature 0 with none. ``shape`` is what the call asks of the endpoint besides its
    messages (the judge's ``response_format``, or that it asks for none): the session sends
    it from here, so what is sent and what is keyed are one value. ``repeat`` tells a call
    asked again on purpose from the first asking (the in-run repeat test: the same judge call
    made twice): it is in the key when above 0, so a repeat is never the first answer replayed
    from the cache, and every other call keeps the key it had.
    """

    kind: CallKind
    endpoint: Endpoint
    messages: Sequence[Mapping[str, str]]
    temperature: float
    slot: str
    seed: int | None = None
    shape: Mapping[str, Any] | None = None
    repeat: int = 0

    @property
    def key(self) -> str:
        """The call's cache key: a hash of everything that determines its answer."""
        parts: dict[str, Any] = {
            "kind": self.kind,
            "endpoint": self.endpoint.identity,
            "request": self.endpoint.request,
            "messages": [dict(m) for m in self.messages],
            "temperature": self.temperature,
            "slot": self.slot,
        }
        if self.seed is not None:
            parts["seed"] = self.seed
        if self.shape is not None:
            parts["shape"] = dict(self.shape)
        if self.repeat:
            parts["repeat"] = self.repeat
        return cache_key(**parts)


def encode_completion(value: Completion) -> str:
    """A SUT answer as the text the cache stores."""
    return json.dumps(
        {
            "text": value.text,
            "finish_reason": value.finish_reason,
            "refused": value.refused,
            "filtered": value.filtered,
        },
        ensure_ascii=False,
    )


def decode_completion(stored: str) -> Completion:
    """A stored SUT answer; anything unreadable raises ``ValueError`` (a cache miss)."""
    data = json.loads(stored)
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        raise ValueError("not a stored completion")
    if not data["text"]:
        # An answer without text is no answer, whoever wrote it into the file: ask again.
        raise ValueError("a stored answer without text")
    return Completion(
        text=data["text"],
        finish_reason=data.get("finish_reason"),
        refused=bool(data.get("refused")),
        filtered=bool(data.get("filtered")),
    )
