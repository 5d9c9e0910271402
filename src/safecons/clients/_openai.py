"""A client for OpenAI-compatible chat-completions endpoints (OpenAI, Azure, vLLM, Ollama, ...).

The client itself: what it is made of and what it shares with a run (identity, facts,
secrets, its wire). Its sessions (``_openai_session``), how it reads an answer
(``_responses``), its options (``_options``), where it sends (``_endpoint``) and the checks of
its arguments (``_arguments``) live beside it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Never

import httpx

from ..errors import ConfigError, InputError
from ._arguments import (
    CREDENTIAL_HEADERS,
    check_flag,
    check_headers,
    check_key_needed,
    check_model,
    check_params,
    has_credential,
    key_from,
)
from ._endpoint import OPENAI_HOST, Endpoint, azure_endpoint, openai_endpoint
from ._facts import ClientFacts
from ._openai_session import OpenAISession
from ._options import BatchOptions, TransportOptions, options_from
from ._proxy import proxy_secrets
from ._secrets import Secrets, is_loopback, key_from_env, shown_env_name
from ._wire import ACCEPT_ENCODING, TransportName, Wire, open_wire

__all__ = ("OpenAICompatible",)


class OpenAICompatible:
    """Chat client for any OpenAI-compatible ``/chat/completions`` endpoint.

    Parameters
    ----------
    model
        Model name sent in the request body (for Azure: the deployment's model, optional).
    base_url
        The API root, e.g. ``http://localhost:8000/v1`` (vLLM), ``http://localhost:11434/v1``
        (Ollama), ``http://localhost:8080/v1`` (llama.cpp). Defaults to ``OPENAI_BASE_URL``, then
        OpenAI's. Requests go to ``{base_url}/chat/completions`` and nowhere else. A URL with
        credentials (``user:pw@``), a query string or a fragment is refused, by a message that
        does not quote it; the scheme may be in any case.
    api_key
        The key, given explicitly: it travels with the client when it is pickled (to a Ray
        actor, a process pool). Sent as a bearer token (or in Azure's ``api-key`` header);
        never shown in reprs, errors or outputs. ``""``: no key. Local servers usually need none.
    api_key_env
        Without ``api_key``, the environment variable the key is read from (default
        ``OPENAI_API_KEY``; ``AZURE_OPENAI_API_KEY`` with :meth:`azure`), stripped of
        surrounding whitespace. A variable named here must hold a key. The key never travels
        in a pickle: the variable is read again where the client is unpickled, and if the
        client was made with a key from it, a process where it is unset fails when the
        client's session opens (before any call), by an error naming the variable.
    params
        Extra request-body fields sent with every call (``max_tokens``, ``top_p``, ``seed``,
        ...). ``model``, ``messages`` and ``temperature`` are set by safecons.
    send_temperature
        Set to ``False`` for models that reject ``temperature`` (reasoning models); the request
        then carries none and the model's own default applies.
    send_seed
        Send each SUT sample's seed (derived from the run's ``seed``, the row's ``input_id``
        and the sample index) as the request's ``seed``, for servers that honour it (OpenAI's
        best-effort determinism, vLLM, llama.cpp, Ollama). Off by default: not every
        OpenAI-compatible server accepts the field.
    headers
        Extra HTTP headers. They are part of the response cache's key (a gateway may route by
        one); a credential header (``Authorization``, ``api-key``, ...) by its name only.
        Names are case-insensitive, as in HTTP: one of each is sent. ``Accept-Encoding`` is
        safecons' own (it reads gzip and deflate, bounded), and a key given as ``api_key``
        is sent in its own header in place of one of the same name here.
    transport
        How the client's requests travel: a :class:`~safecons.clients.TransportOptions`
        (the wire, ``http_timeout``, ``max_response_bytes``), or, for the default bounds, the
        wire alone: ``"auto"`` (default), ``"aiohttp"``, ``"httpx"`` or an ``httpx`` async
        transport object (``httpx.MockTransport`` in tests), as ``TransportOptions(via=...)``
        reads them. ``"direct"``, the former name of ``"aiohttp"``, is still read as it, with
        a ``DeprecatedOptionWarning`` (a ``FutureWarning``).
    batch
        Send this client's calls through the provider's Batch API (OpenAI's, Azure OpenAI's
        global batch) instead of one request each: half the price, for runs that can wait up
        to the 24-hour completion window. ``True``, or a
        :class:`~safecons.clients.BatchOptions` (how often to look at a batch, how long calls
        wait to go out together, whether an interrupted run cancels its batch). The run
        writes each stage's requests as JSONL files, creates one batch per file, polls it and
        puts every answer in its row; the batch id is recorded in the run's cache as soon as
        the batch exists, so running the same call again with the same cache picks the batch
        up instead of paying twice. Answers are cached under the same keys as live calls.
        See ``docs/batch.md``.

    Notes
    -----
    The keywords ``http_timeout``, ``max_response_bytes`` (now in ``TransportOptions``),
    ``cancel_on_interrupt``, ``batch_poll_seconds`` and ``batch_wait_seconds`` (now in
    ``BatchOptions``) are still read, with a ``DeprecatedOptionWarning``, for one version.

    Every text that comes back from the server (answers, error bodies, exception messages)
    is scrubbed of the key, of every credential-like header value (``Authorization``,
    ``api-key``, ``x-api-key``, cookies, ...) and of the credentials of the proxies the
    environment names (``HTTPS_PROXY=http://user:pw@proxy``) before it is kept or cut to
    length. Values shorter than 8 characters are not treated as secrets. A key is never sent
    over plain ``http`` except to a loopback host (127.0.0.0/8, ``::1``, ``localhost``): a
    client that would is refused where it is made.

    Examples
    --------
    >>> from safecons import OpenAICompatible
    >>> OpenAICompatible(model="llama3.1", base_url="http://localhost:11434/v1", api_key="sk-x")
    OpenAICompatible(base_url='http://localhost:11434/v1', model='llama3.1', api_key=<set>)
    >>> import os, pickle
    >>> os.environ["MY_GATEWAY_KEY"] = "sk-gateway-0123456789"
    >>> client = OpenAICompatible(
    ...     model="m", base_url="https://gw:4000", api_key_env="MY_GATEWAY_KEY")
    >>> b"sk-gateway" in pickle.dumps(client)
    False
    >>> del os.environ["MY_GATEWAY_KEY"]
    """

    def __init__(
        self,
        *,
        model: str | None,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        params: Mapping[str, Any] | None = None,
        send_temperature: bool = True,
        send_seed: bool = False,
        headers: Mapping[str, str] | None = None,
        transport: TransportOptions | TransportName | httpx.AsyncBaseTransport = "auto",
        batch: bool | BatchOptions = False,
        **moved: Never,
    ) -> None:
        # Read here, straight from the user's call, so a warning points at the user's line.
        options = options_from(transport, batch, moved, "OpenAICompatible")
        check_model(model, required=True)
        self._setup(
            openai_endpoint(base_url),
            model=model,
            api_key=api_key,
            api_key_env=api_key_env,
            params=params,
            send_temperature=send_temperature,
            send_seed=send_seed,
            headers=headers,
            options=options,
        )

    @classmethod
    def azure(
        cls,
        *,
        endpoint: str,
        deployment: str,
        api_version: str,
        api_key: str | None = None,
        api_key_env: str | None = None,
        model: str | None = None,
        params: Mapping[str, Any] | None = None,
        send_temperature: bool = True,
        send_seed: bool = False,
        headers: Mapping[str, str] | None = None,
        transport: TransportOptions | TransportName | httpx.AsyncBaseTransport = "auto",
        batch: bool | BatchOptions = False,
        **moved: Never,
    ) -> OpenAICompatible:
        """Client for an Azure OpenAI deployment.

        Requests go to ``{endpoint}/openai/deployments/{deployment}/chat/completions`` with
        ``?api-version=...`` and the key in the ``api-key`` header: ``api_key``, or the
        variable ``api_key_env`` names (default ``AZURE_OPENAI_API_KEY``), read again where
        the client is unpickled, as for the constructor. ``endpoint`` passes the checks of
        ``base_url``; ``model`` is optional (the deployment names one); the other keywords
        are the constructor's.

        Examples
        --------
        >>> c = OpenAICompatible.azure(endpoint="https://res.openai.azure.com",
        ...                            deployment="gpt4o", api_version="2024-10-21", api_key="k")
        >>> c.identity
        'https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions#gpt4o'
        """
        options = options_from(transport, batch, moved, "OpenAICompatible.azure")
        check_model(model, required=False)
        client = cls.__new__(cls)
        client._setup(
            azure_endpoint(endpoint, deployment, api_version),
            model=model,
            api_key=api_key,
            api_key_env=api_key_env,
            params=params,
            send_temperature=send_temperature,
            send_seed=send_seed,
            headers=headers,
            options=options,
        )
        return client

    def _setup(
        self,
        where: Endpoint,
        *,
        model: str | None,
        api_key: str | None,
        api_key_env: str | None,
        params: Mapping[str, Any] | None,
        send_temperature: bool,
        send_seed: bool,
        headers: Mapping[str, str] | None,
        options: tuple[TransportOptions, BatchOptions | None],
    ) -> None:
        """Make the client that sends to ``where`` (the constructor's and :meth:`azure`'s)."""
        self.base_url = where.base_url
        self.model = model
        default_env = where.default_key_env if where.sends_default_key else None
        #: The default variable left unread for this base URL (named by a 401's message).
        self._withheld_env = (
            where.default_key_env
            if default_env is None and api_key is None and api_key_env is None
            else None
        )
        # A key read from the environment never travels in a pickle: the variable's name
        # does, and the key is read again where the client is unpickled (a Ray actor).
        key, self._key_env, self._key_required = key_from(api_key, api_key_env, default_env)
        self._key_problem: str | None = None
        self._api_key = key
        # The headers are checked before the no-key check reads them for a credential.
        self.headers = check_headers(headers)
        check_key_needed(
            key,
            self._key_env or where.default_key_env,
            self.headers,
            self.base_url,
            self._withheld_env,
        )
        self.params = check_params(params)
        self.send_temperature = check_flag("send_temperature", send_temperature)
        self.send_seed = check_flag("send_seed", send_seed)
        self.transport, self.batch = options
        self._url = where.url
        self._deployment = where.deployment
        self._auth_header = where.auth_header
        self._query = dict(where.query)
        self._secrets = Secrets.of(api_key=self._api_key, headers=self._request_headers())
        self._joined: tuple[Secrets, Secrets] | None = None
        if (problem := self._plain_http_problem()) is not None:
            raise InputError(problem)

    # What the Batch API's session reads of the client's options, by their former names.
    @property
    def http_timeout(self) -> float:
        """The socket-level timeout (``transport``'s ``http_timeout``)."""
        return self.transport.http_timeout

    @property
    def max_response_bytes(self) -> int:
        """The bound on one response body (``transport``'s ``max_response_bytes``)."""
        return self.transport.max_response_bytes

    @property
    def batch_poll_seconds(self) -> float:
        """The longest wait between two looks at a batch (``batch``'s ``poll_seconds``)."""
        return (self.batch or BatchOptions()).poll_seconds

    @property
    def batch_wait_seconds(self) -> float:
        """How long waiting calls wait for another (``batch``'s ``wait_seconds``)."""
        return (self.batch or BatchOptions()).wait_seconds

    @property
    def cancel_on_interrupt(self) -> bool:
        """Whether an interrupted run cancels its batch (``batch``'s ``cancel_on_interrupt``)."""
        return self.batch is not None and self.batch.cancel_on_interrupt

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_secrets"]  # made from the key and headers, again where unpickled
        state["_joined"] = None  # and the proxies' credentials, from the environment there
        if self._key_env is not None:
            state["_api_key"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._key_problem = None
        if self._key_env is not None:
            self._api_key, problem = key_from_env(self._key_env, required=self._key_required)
            if problem is not None:
                # Raised when the session opens, not here: an error inside Ray's unpickling
                # would not say which client, nor reach the user as clearly.
                self._key_problem = (
                    f"{problem} in this process (pid {os.getpid()}), where the client was "
                    "unpickled. A key read from the environment never travels in a pickle: "
                    f"set {shown_env_name(self._key_env)} in the environment of every process "
                    "that runs the client (for Ray, see docs/scale-out.md), or make the client "
                    "with api_key='' if the endpoint needs no key"
                )
        self._secrets = Secrets.of(api_key=self._api_key, headers=self._request_headers())
        self._joined = None

    @property
    def secrets(self) -> Secrets:
        """What this client sends that must never come back out: the key, auth headers, and
        the credentials of the proxies the environment names (read at each use)."""
        proxies = proxy_secrets()
        joined = self._joined
        if joined is None or joined[0] is not proxies:
            joined = self._joined = (proxies, self._secrets | proxies)
        return joined[1]

    def _plain_http_problem(self) -> str | None:
        """Why this client may not send: a key (``api_key=``, a variable's, a credential
        header) to a host other than this machine over plain ``http``, where anyone on the
        path (a Wi-Fi, a proxy, a gateway) reads it; None when it may.

        A transport object of the user's own is theirs to answer for (``httpx.MockTransport``
        sends nothing anywhere); httpx's own network transport is checked as a name is.
        """
        if (
            isinstance(self.transport.via, httpx.AsyncBaseTransport)
            and not isinstance(self.transport.via, httpx.AsyncHTTPTransport)
        ) or not (self._api_key or has_credential(self.headers)):
            return None
        url = httpx.URL(self._url)
        if url.scheme != "http" or is_loopback(url.host):
            return None
        where = "endpoint" if self._deployment is not None else "base_url"
        return (
            f"{where}: refusing to send a key over plain http to {url.host}, which is not a "
            "loopback host (127.0.0.0/8, ::1, localhost): anyone on the way could read it. Use "
            "an https:// URL, or a proxy or gateway on this machine (http://127.0.0.1:PORT) "
            "that forwards over https"
        )

    def credentials_hint(self, message: str) -> str:
        """What a 401/403 means for this client, and what to do, after the provider's
        ``message``."""
        withheld = self._withheld_env
        if self._api_key is None and withheld is not None and os.environ.get(withheld):
            return (
                f"the endpoint wants credentials and none were sent ({message}). "
                f"{withheld} is sent only to OpenAI's own API ({OPENAI_HOST}) or to the "
                "OPENAI_BASE_URL set beside it, never to another base URL: pass api_key= or "
                f"api_key_env='{withheld}' (CLI: --sut-key-env/--judge-key-env) to send a key here"
            )
        return (
            f"the endpoint rejected the credentials ({message}). Check the API key "
            "(argument api_key or the environment variable) and the model's access."
        )

    @property
    def identity(self) -> str:
        """The endpoint's identity: URL and model, never the key."""
        name = self.model or self._url.rsplit("/deployments/", 1)[-1].split("/", 1)[0]
        return f"{self._url}#{name}"

    @property
    def facts(self) -> ClientFacts:
        """What the run knows of this client beyond its identity (cache keys, token
        estimates, batching, secrets)."""
        return ClientFacts(
            request=self.request_fingerprint,
            model=self.model,
            params=self.params,
            batch=self.batch is not None,
            # Its own; a run adds the proxies' credentials once (secrets_of), not at each
            # reading of the facts, which the dry run does for every call.
            secrets=self._secrets,
        )

    @property
    def request_fingerprint(self) -> dict[str, Any]:
        """What besides the messages shapes an answer: URL, query, params, options and the
        extra headers, a credential header (:data:`CREDENTIAL_HEADERS`) by its name only."""
        fingerprint: dict[str, Any] = {
            "url": self._url,
            "query": self._query,
            "params": self.params,
            "send_temperature": self.send_temperature,
            "send_seed": self.send_seed,
        }
        if self.headers:
            # Gateways route by header (x-route: r1 or r2), so a header's value is part of
            # the key. A credential's is not, not even hashed: it would put a hash of the key
            # in the cache, and rotating a key would empty it. Only the headers that carry
            # nothing but a credential count so: one that merely looks like one
            # (x-routing-key, x-session-affinity) may route, and a wrong replay costs more
            # than a miss. Left out when there are no headers, so the keys of a client
            # without them stay what they were.
            fingerprint["headers"] = sorted(
                [name.lower(), None if name.lower() in CREDENTIAL_HEADERS else value]
                for name, value in self.headers.items()
            )
        return fingerprint

    def __repr__(self) -> str:
        key = "<set>" if self._api_key else None
        batch = ", batch=True" if self.batch else ""
        return (
            f"OpenAICompatible(base_url={self.base_url!r}, model={self.model!r}, "
            f"api_key={key}{batch})"
        )

    def _request_headers(self) -> dict[str, str]:
        # Header names are case-insensitive: one of each is sent, never two spellings.
        headers = {name.lower(): value for name, value in self.headers.items()}
        # Only encodings the wire can inflate with a bound, whatever the headers asked for.
        headers["accept-encoding"] = ACCEPT_ENCODING
        if self._api_key:
            if self._auth_header == "api-key":
                headers["api-key"] = self._api_key
            else:
                headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    @asynccontextmanager
    async def session(self) -> AsyncIterator[OpenAISession]:
        if self._key_problem is not None:
            raise ConfigError(self._key_problem)
        async with self.wire() as wire:
            yield OpenAISession(self, wire)

    def wire(self) -> AbstractAsyncContextManager[Wire]:
        """The wire this client's requests go by (a session's, a Batch API's), for as long
        as the block lasts: one HTTP stack for every request, with this client's headers,
        ``http_timeout``, proxies and ``transport``. A key that would go over plain http to
        another host (read where the client was unpickled) is a :class:`ConfigError` here,
        before any request."""
        if (problem := self._plain_http_problem()) is not None:
            raise ConfigError(f"{problem} (the key was read in this process, pid {os.getpid()})")
        return open_wire(
            self.transport.via,
            url=self._url,
            headers=self._request_headers(),
            timeout=self.transport.http_timeout,
            scrub=self.secrets.scrub,
        )
