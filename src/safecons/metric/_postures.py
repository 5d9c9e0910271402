"""Each answer's posture, read while the run's calls go on.

A judged frame records the posture of each row's base answer and of each fresh answer
(:func:`safecons.judges.answer_postures`: offline, about 2 ms a distinct answer). Read
after the calls, that would add its whole time to the run's; read here, in a worker thread
fed as the answers come, it overlaps the calls' waiting, and the loop stays free to handle
answers and to hear an interrupt. An answer read before (a refusal many rows give alike)
is looked up on the loop and never sent to the thread: each hop there and back costs the
loop the interpreter's lock twice, which at a thousand answers a second was a tenth of the
run's wall time.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Final, cast

import anyio
import anyio.to_thread

from .._record import Postures, Sample
from ..judges import PostureMemo, answer_postures

__all__ = ("PostureReader",)

#: What the memo gives for an answer not read yet.
_UNREAD: Final = object()

#: The most answers read in one hop to the worker thread: what an interrupt may have to wait
#: for (about 0.1 s of answers of GPTFuzz's length; a hop costs about 0.1 ms).
CHUNK = 64


class PostureReader:
    """Reads the postures of ``bases`` (one per row, answering ``queries``) at once and of
    each sample of ``results`` once :meth:`answered` names it, in a worker thread, until
    :meth:`close`; :attr:`postures` once :meth:`read` has returned. Each distinct answer is
    read once (:func:`~safecons.judges.answer_postures`)."""

    def __init__(
        self, queries: Sequence[str], bases: Sequence[str], results: Sequence[Sequence[Sample]]
    ) -> None:
        self._queries = queries
        self._bases = bases
        self._results = results
        self._send, self._receive = anyio.create_memory_object_stream[tuple[int, int]](math.inf)
        self._base: list[str | None] = [None] * len(bases)
        self._fresh: list[list[str | None]] = [[None] * len(row) for row in results]
        self._memo: PostureMemo = {}

    def answered(self, row: int, sample: int) -> None:
        """The sample ``sample`` of row ``row`` has its answer: read its posture."""
        response = self._results[row][sample].response
        assert response is not None
        read, posture = self._known(self._queries[row], response)
        if read:
            self._fresh[row][sample] = posture
        else:
            self._send.send_nowait((row, sample))

    def _known(self, query: str, answer: str) -> tuple[bool, str | None]:
        """Whether ``answer`` to ``query`` was read before, and its posture if so (the memo's
        keys, :data:`~safecons.judges.PostureMemo`: an answer, then, where its posture rests
        on the query, the pair)."""
        posture = self._memo.get(answer, _UNREAD)
        if posture is None:
            posture = self._memo.get((query, answer), _UNREAD)
        return (False, None) if posture is _UNREAD else (True, cast("str | None", posture))

    def close(self) -> None:
        """No more answers come: :meth:`read` returns once it has read those sent."""
        self._send.close()

    @property
    def postures(self) -> Postures:
        return self._base, self._fresh

    async def read(self) -> None:
        """Read the bases, then each answer as it is named, until :meth:`close`."""
        bases = list(zip(self._queries, self._bases, strict=True))
        for start in range(0, len(bases), CHUNK):
            # In chunks: an interrupt waits for one chunk's reading at most, not all the rows'.
            self._base[start : start + CHUNK] = await self._postures(bases[start : start + CHUNK])
        async with self._receive:
            async for first in self._receive:
                chunk = [first]
                while len(chunk) < CHUNK:
                    try:
                        chunk.append(self._receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                pairs = []
                for i, j in chunk:
                    response = self._results[i][j].response
                    assert response is not None
                    pairs.append((self._queries[i], response))
                for (i, j), posture in zip(chunk, await self._postures(pairs), strict=True):
                    self._fresh[i][j] = posture

    async def _postures(self, pairs: list[tuple[str, str]]) -> list[str | None]:
        """The postures of ``pairs`` (query, answer): those read before from the memo, the
        others in the worker thread (which remembers them)."""
        known = [self._known(query, answer) for query, answer in pairs]
        unread = [pair for pair, (read, _) in zip(pairs, known, strict=True) if not read]
        if not unread:
            return [posture for _, posture in known]
        queries = [query for query, _ in unread]
        answers: list[str | None] = [answer for _, answer in unread]
        reading = functools.partial(answer_postures, queries, answers, memo=self._memo)
        fresh = iter(await anyio.to_thread.run_sync(reading))
        return [posture if read else next(fresh) for read, posture in known]
