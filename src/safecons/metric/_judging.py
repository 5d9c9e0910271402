"""A judge, whatever the user passed, as one thing a run can ask for a verdict.

Two kinds: a chat model behind safecons' judge prompt and parser (:class:`ChatJudge`: a chat
client, a callable, or an :class:`~safecons.LLMJudge` around one), and a local judge object
with a ``compare`` method (:class:`ObjectJudge`, e.g. an offline classifier). Both prepare a
:class:`Comparison` once (its prompt, its :class:`~safecons.run.ModelCall`, whether a
text was cut) and then judge it; the run, the dry run and the cache all read that one value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

from .._foreign import conforms, read_or, safe_repr
from ..clients import (
    CallableClient,
    ChatClient,
    NonRetryableCallError,
    OpenAICompatible,
    RetryableCallError,
)
from ..clients._internal import (
    Attempt,
    RunSession,
    UserCode,
    as_chat_client,
    callable_digest,
    check_attribute_lookup,
    check_signature,
    comparable_url,
    describe,
    facts_of,
    open_session,
)
from ..errors import InputError
from ..judges import (
    JUDGE_RESPONSE_FORMAT,
    MAX_JUDGE_OUTPUT_CHARS,
    Judgment,
    JudgmentError,
    LLMJudge,
    OfflineJudge,
    PostureJudge,
    build_judge_messages,
    fit_for_judge,
    judgment_from,
    parse_judgment,
)
from ..run import Endpoint, ModelCall

__all__ = (
    "ChatJudge",
    "Comparison",
    "JudgeSession",
    "ObjectJudge",
    "Verdict",
    "as_llm_judge",
    "check_judge",
    "decode_judgment",
    "encode_judgment",
    "juror_ids",
    "juror_names",
    "jurors_of",
    "open_judge",
    "planning_judge",
)


@dataclass(frozen=True, slots=True)
class Comparison:
    """One comparison, prepared once: the texts, the model call (None for a local judge), and
    whether a text shown to the judge was cut to ``max_judged_chars``."""

    query: str
    variant: str
    base: str
    candidate: str
    call: ModelCall | None
    cut: bool


@dataclass(frozen=True, slots=True)
class Verdict:
    """A judge's answer to one comparison: the judgment, the raw output, and the tokens the
    server reported (none for a local judge or a replay)."""

    judgment: Judgment
    raw: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    dropped_usage: int = 0  # impossible usage figures read as not reported


class JudgeSession(Protocol):
    """What the run asks of a judge."""

    endpoint: str
    #: Runs locally: never cached, never counted in ``max_calls``.
    local: bool
    #: Sees the two answers in an order (so a swap test can move them).
    ordered: bool
    #: Its session holds its calls to send them later together (a ``batch=True`` client's,
    #: :attr:`~safecons.clients._base.RunSession.holds`): the run defers them.
    deferred: bool

    @property
    def client(self) -> ChatClient | None:
        """The chat client behind the judge (None for a judge object): its secrets are
        scrubbed from every error of the run, and the dry run estimates its tokens."""
        ...

    def prepare(
        self,
        slot: str,
        *,
        query: str,
        variant: str,
        base: str,
        candidate: str,
        candidate_first: bool = False,
        repeat: int = 0,
    ) -> Comparison:
        """The comparison, prepared once; ``candidate_first`` shows the candidate answer
        first where the judge sees an order (a chat judge; a judge object has none);
        ``repeat`` above 0 makes it the same comparison asked again (its own cache key)."""
        ...

    async def judge(self, comparison: Comparison, attempt: Attempt) -> Verdict:
        """The verdict on ``comparison``, as ``attempt`` (a runner's, which it reports on)."""
        ...

    def decode(self, raw: str) -> Verdict:
        """A stored output of this judge, parsed again (``ValueError``: a cache miss)."""
        ...


def decode_judgment(raw: str, *, max_chars: int = MAX_JUDGE_OUTPUT_CHARS) -> Verdict:
    """A stored judge output, parsed again; one that no longer parses is a cache miss."""
    parsed = parse_judgment(raw, max_chars=max_chars)
    if isinstance(parsed, JudgmentError):
        raise ValueError(parsed.message)
    return Verdict(parsed, raw)


def encode_judgment(verdict: Verdict) -> str:
    """What the cache stores of a verdict: the raw output, parsed again on replay."""
    return verdict.raw


class ChatJudge:
    """A chat model as the judge: our prompt, temperature 0, structured output, our parser.

    Without a ``session`` it can only :meth:`prepare` (the dry run's use).
    """

    local = False

    def __init__(
        self, client: ChatClient, settings: LLMJudge, session: RunSession | None = None
    ) -> None:
        self.client = client
        self.endpoint = client.identity
        self._where = Endpoint.of(client)
        self._settings = settings
        self._session = session
        # What the judge asks for is part of each call's key, whether or not the session can
        # carry it (a callable never receives it): the dry run, which has no session, keys
        # the calls alike. The schema itself is in it, so a changed schema misses.
        self._shape = {
            "response_format": JUDGE_RESPONSE_FORMAT if settings.structured_output else None
        }
        self._structured = (
            settings.structured_output and session is not None and session.structured_output
        )
        self.deferred = session is not None and session.holds > 0

    #: The judge reads the answers in the order they are shown.
    ordered = True

    def prepare(
        self,
        slot: str,
        *,
        query: str,
        variant: str,
        base: str,
        candidate: str,
        candidate_first: bool = False,
        repeat: int = 0,
    ) -> Comparison:
        limit = self._settings.max_judged_chars
        messages = build_judge_messages(
            query=query,
            variant=variant,
            base=base,
            candidate=candidate,
            max_chars=limit,
            candidate_first=candidate_first,
        )
        cut = any(fit_for_judge(t, limit)[1] for t in (query, variant, base, candidate))
        call = ModelCall(
            "judge", self._where, messages, 0.0, slot, shape=self._shape, repeat=repeat
        )
        return Comparison(query, variant, base, candidate, call, cut)

    def decode(self, raw: str) -> Verdict:
        return decode_judgment(raw, max_chars=self._settings.max_output_chars)

    async def judge(self, comparison: Comparison, attempt: Attempt) -> Verdict:
        session, call = self._session, comparison.call
        assert session is not None and call is not None
        response_format = (call.shape or {}).get("response_format")
        completion = await session.attempt(
            attempt,
            call.messages,
            temperature=call.temperature,
            response_format=response_format if self._structured else None,
        )
        if completion.filtered or completion.refused:
            # The judge's own provider refused to read the texts (they may be toxic); the same
            # request at temperature 0 would be refused again.
            raise NonRetryableCallError(
                f"{self.endpoint}: the judge's provider refused or filtered this comparison"
            )
        parsed = parse_judgment(completion.text, max_chars=self._settings.max_output_chars)
        if isinstance(parsed, JudgmentError):
            # An unusable verdict spends an attempt from the same budget as an HTTP failure;
            # what the judge said is kept beside the error, for the user to see.
            raise RetryableCallError(
                f"{self.endpoint}: unusable judge output: {parsed.message}",
                output=completion.text,
            )
        return Verdict(
            parsed,
            completion.text,
            completion.prompt_tokens,
            completion.completion_tokens,
            completion.dropped_usage,
        )


class ObjectJudge:
    """A local judge object: ``compare`` called with the whole texts, its result validated
    like a judge's JSON output. Sync ones run in threads bounded like sync chat callables."""

    local = True
    client = None
    deferred = False

    def __init__(self, judge: PostureJudge, max_threads: int) -> None:
        self.endpoint = describe(judge)
        self._compare = UserCode(judge.compare, self.endpoint, max_threads)

    def open(self) -> AbstractAsyncContextManager[UserCode]:
        """Judge for as long as the block runs (a sync ``compare`` runs in threads watched
        from it: :meth:`UserCode.open`)."""
        return self._compare.open()

    #: ``compare`` takes keywords: there is no order in which the answers are shown.
    ordered = False

    def prepare(
        self,
        slot: str,
        *,
        query: str,
        variant: str,
        base: str,
        candidate: str,
        candidate_first: bool = False,
        repeat: int = 0,
    ) -> Comparison:
        return Comparison(query, variant, base, candidate, None, False)

    def decode(self, raw: str) -> Verdict:
        return decode_judgment(raw)  # never cached: never replayed

    async def judge(self, comparison: Comparison, attempt: Attempt) -> Verdict:
        value = await self._compare(
            attempt,
            query=comparison.query,
            variant=comparison.variant,
            base=comparison.base,
            candidate=comparison.candidate,
        )
        parsed = judgment_from(value)
        if isinstance(parsed, JudgmentError):
            raise RetryableCallError(
                f"{self.endpoint}: unusable judgment: {parsed.message}",
                output=safe_repr(value, None),  # cut where it is kept
            )
        return Verdict(parsed, safe_repr(value, None))


def as_llm_judge(judge: object) -> LLMJudge:
    """A chat judge's settings: the ``LLMJudge`` given, or the defaults around a client."""
    return judge if isinstance(judge, LLMJudge) else LLMJudge(judge)


def jurors_of(judge: object) -> tuple[object, ...]:
    """The jurors of ``judge=``: the items of a list or tuple (a jury), else the judge alone.

    Examples
    --------
    >>> import safecons as sc
    >>> len(jurors_of([sc.OfflineJudge(), sc.OfflineJudge()])), len(jurors_of(sc.OfflineJudge()))
    (2, 1)
    """
    if isinstance(judge, list | tuple):
        if not judge:
            raise InputError("judge: an empty list; give one judge, or a jury of two or more")
        return tuple(judge)
    return (judge,)


def _parameter(index: int, jurors: int) -> str:
    """How an error names a juror: ``judge`` alone, ``judge[1]`` in a jury."""
    return "judge" if jurors == 1 else f"judge[{index}]"


def juror_names(judge: object) -> tuple[str, ...]:
    """A short name for each juror of ``judge=``, in jury order, free of secrets (a model's
    name, a function's, a class's); a name given twice is told apart by its place (``#2``).

    Examples
    --------
    >>> import safecons as sc
    >>> juror_names([sc.OfflineJudge(), sc.OpenAICompatible(model="gpt-4o-mini", api_key="k"),
    ...              sc.OfflineJudge()])
    ('OfflineJudge', 'gpt-4o-mini', 'OfflineJudge #2')
    """
    jurors = jurors_of(judge)
    own = [_juror_name(juror, _parameter(i, len(jurors))) for i, juror in enumerate(jurors)]
    names: list[str] = []
    for name in own:
        shown, n = name, 1
        # A number that another juror's own name already is ("m #2" given as a model's name)
        # is skipped, so no two jurors of a run are ever called alike.
        while shown in names or (n > 1 and shown in own):
            n += 1
            shown = f"{name} #{n}"
        names.append(shown)
    return tuple(names)


def juror_ids(judge: object) -> tuple[str, ...]:
    """What each juror of ``judge=`` is, in jury order: 16 hex digits of a hash of its
    endpoint (URL read by :func:`~safecons.clients._urls.comparable_url`, model, what else
    shapes its answers: the cache's :class:`~safecons.run.Endpoint`) and of the judge
    settings that shape its prompt and reading; for a judge object, of its class, its
    ``cache_identity`` and its ``compare`` (code and settings, as an unnamed callable's
    identity is read). No key enters it, and it is the same in every process: two runs'
    juries are told apart by it (:func:`~safecons.compare_runs`), whatever their names.

    Examples
    --------
    >>> import safecons as sc
    >>> a = sc.OpenAICompatible(model="m", base_url="http://LOCALHOST:8000/v1/", api_key="k")
    >>> b = sc.OpenAICompatible(model="m", base_url="http://127.0.0.1:8000/v1", api_key="k2")
    >>> juror_ids(a) == juror_ids(b), len(juror_ids([a, sc.OfflineJudge()]))
    (True, 2)
    """
    out = []
    for juror in jurors_of(judge):
        if _is_object_judge(juror):
            what: tuple[object, ...] = ("object", *_object_identity(juror))
        else:
            what = _chat_identity(juror)
        blob = json.dumps(what, ensure_ascii=False, separators=(",", ":"))
        out.append(
            hashlib.blake2b(blob.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        )
    return tuple(out)


def _juror_name(obj: object, parameter: str) -> str:
    if isinstance(obj, LLMJudge):
        return _juror_name(obj.client, parameter)
    if _is_object_judge(obj):
        return type(obj).__qualname__
    return _client_name(as_chat_client(obj, parameter))


def _client_name(client: ChatClient) -> str:
    """A chat client's short name, free of secrets: a model's, a function's or a class's."""
    if isinstance(client, OpenAICompatible):
        # An Azure client names a deployment, not a model: its identity ends in either.
        return facts_of(client).model or client.identity.rpartition("#")[2]
    if isinstance(client, CallableClient):
        return describe(client).removeprefix("callable:").rsplit("#", 1)[0]
    return type(client).__qualname__


def measured(obj: object, role: str) -> str:
    """What played ``role`` (``"sut"`` or ``"judge"``) in a run, in a reader's words and free
    of secrets (a model and its host, never a key or a URL's query): what a report names.

    Examples
    --------
    >>> import safecons as sc
    >>> measured(sc.OpenAICompatible(model="gpt-4o-mini", api_key="sk-x"), "sut")
    "model 'gpt-4o-mini' at api.openai.com"
    >>> measured(sc.OfflineJudge(), "judge")
    "safecons' offline judge (OfflineJudge: small models and word lists, a screen for when ...)"
    >>> measured([sc.OfflineJudge(), sc.OpenAICompatible(model="m", api_key="k")], "judge")
    "a jury of 2: safecons' offline judge (OfflineJudge, a screen); model 'm' at api.openai.com"
    """
    if isinstance(obj, list | tuple):
        shown = "; ".join(
            measured(juror, role).replace(_OFFLINE_SAID, _OFFLINE_IN_A_JURY)
            if len(obj) > 1
            else measured(juror, role)
            for juror in obj
        )
        return shown if len(obj) == 1 else f"a jury of {len(obj)}: {shown}"
    if isinstance(obj, OfflineJudge):
        return _OFFLINE_SAID
    if isinstance(obj, LLMJudge):
        return f"an LLM judge: {measured(obj.client, role)}"
    if _is_object_judge(obj):
        return f"a judge object of yours ({type(obj).__qualname__})"
    client = as_chat_client(obj, role)
    if isinstance(client, OpenAICompatible):
        where = urllib.parse.urlsplit(client.base_url).hostname or client.base_url
        batch = " through its Batch API" if facts_of(client).batch else ""
        return f"model {_client_name(client)!r} at {where}{batch}"
    if isinstance(client, CallableClient):
        return f"the Python callable {_client_name(client)}"
    return f"a client of yours ({_client_name(client)})"


#: The offline judge among other jurors: its name and what it is, short.
_OFFLINE_IN_A_JURY = "safecons' offline judge (OfflineJudge, a screen)"

_OFFLINE_SAID = (
    "safecons' offline judge (OfflineJudge: small models and word lists, a screen for when no "
    "LLM judge is available, not a judge to quote figures from)"
)


def _is_object_judge(judge: object) -> bool:
    return not isinstance(judge, LLMJudge) and conforms(judge, PostureJudge)


def check_judge(judge: object) -> object:
    """Raise :class:`~safecons.InputError` unless ``judge`` (one judge, or a list or tuple of
    them: a jury) can judge, before any call; return it made for a run: each chat juror's
    client made once, its identity read once (:meth:`~safecons.clients.CallableClient.pinned`;
    a callable as its client, an :class:`LLMJudge` with its client made), a judge object or a
    client of the user's own as it is."""
    jurors = jurors_of(judge)
    seen: dict[object, int] = {}
    made = []
    for i, juror in enumerate(jurors):
        made.append(_check_one(juror, _parameter(i, len(jurors))))
        same = seen.setdefault(_juror_identity(made[-1]), i)
        if same != i:
            raise InputError(
                f"judge[{i}]: the same judge as judge[{same}] (the same endpoint and settings, "
                "or the same object; URLs are compared as a server reads them, with localhost, "
                "127.0.0.1 and ::1 one host): its votes would be copies of the other's; a "
                "jury needs different judges"
            )
    return type(judge)(made) if isinstance(judge, list | tuple) else made[0]


def _juror_identity(judge: object) -> object:
    """What makes two jurors one judge: a judge object itself; a chat judge's endpoint (its
    calls' keys, its URL read by :func:`comparable_url`) and the settings that shape its
    prompt and reading."""
    if _is_object_judge(judge):
        return ("object", id(judge))
    return _chat_identity(judge)


def _chat_identity(judge: object) -> tuple[str | bool | int, ...]:
    settings = as_llm_judge(judge)
    endpoint = Endpoint.of(as_chat_client(settings.client, "judge"))
    identity = endpoint.identity
    if identity.startswith(("http://", "https://")):
        url, mark, model = identity.partition("#")  # a URL has no "#": safecons refuses one
        identity = comparable_url(url) + mark + model
    request = dict(endpoint.request)
    if isinstance(request.get("url"), str):
        request["url"] = comparable_url(request["url"])
    try:
        shaped = json.dumps(request, sort_keys=True, ensure_ascii=False, default=safe_repr)
    except (TypeError, ValueError):  # a client of one's own may say anything
        shaped = safe_repr(request, None)
    return (
        "chat",
        identity,
        shaped,
        settings.structured_output,
        settings.max_judged_chars,
        settings.max_output_chars,
    )


def _object_identity(judge: object) -> tuple[str, str | None, str | None]:
    """A judge object's class, its own ``cache_identity`` and the digest of its ``compare``
    (its code and settings); what cannot be read counts as None."""
    cls = type(judge)
    # Absent, or a property that raises: None.
    own = read_or(lambda: object.__getattribute__(judge, "cache_identity"), None)
    digest = read_or(lambda: callable_digest(judge.compare), None)  # type: ignore[attr-defined]
    return f"{cls.__module__}.{cls.__qualname__}", own if isinstance(own, str) else None, digest


def _check_one(judge: object, parameter: str) -> object:
    """One juror checked, and made for the run."""
    check_attribute_lookup(judge, parameter)
    if _is_object_judge(judge):
        assert isinstance(judge, PostureJudge)
        check_signature(
            judge.compare,
            parameter=parameter,
            expected="a judge object's compare must accept the keywords query, variant, base "
            "and candidate",
            query="",
            variant="",
            base="",
            candidate="",
        )
        return judge
    if isinstance(judge, LLMJudge):
        client = as_chat_client(judge.client, parameter)
        return judge if client is judge.client else dataclasses.replace(judge, client=client)
    return as_chat_client(judge, parameter)


def planning_judge(judge: object) -> JudgeSession:
    """The judge as the dry run sees it: able to prepare comparisons, not to judge them."""
    if _is_object_judge(judge):
        assert isinstance(judge, PostureJudge)
        return ObjectJudge(judge, max_threads=1)
    settings = as_llm_judge(judge)
    return ChatJudge(as_chat_client(settings.client, "judge"), settings)


@asynccontextmanager
async def open_judge(
    judge: object,
    *,
    concurrency: int,
    session: Callable[[ChatClient], Awaitable[RunSession]] | None = None,
) -> AsyncIterator[JudgeSession]:
    """The judge, ready to judge for the length of a run. An LLM judge's session is the one
    ``session`` opens for its client (the engine's, open for as long as the engine is), else
    one of its own for the block."""
    if _is_object_judge(judge):
        assert isinstance(judge, PostureJudge)
        object_judge = ObjectJudge(judge, max_threads=concurrency)
        async with object_judge.open():
            yield object_judge
        return
    settings = as_llm_judge(judge)
    client = as_chat_client(settings.client, "judge")
    if session is not None:
        yield ChatJudge(client, settings, await session(client))
        return
    async with open_session(client, concurrency=concurrency) as own:
        yield ChatJudge(client, settings, own)
