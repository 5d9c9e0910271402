"""What OpenAICompatible accepts as arguments, and how it treats a key."""

from __future__ import annotations

import json

import httpx
import polars as pl
import pytest

import safecons as sc
from safecons.clients import BatchOptions, TransportOptions
from safecons.errors import DeprecatedOptionWarning, InputError
from safecons.testing import StandInJudge

REFUSE = "I'm sorry, but I can't help with that."
VERDICT = json.dumps({"label": "Consistent", "score": 0.9})
KEY = "sk-review-SECRET-424242"


def rows(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "input_id": list(range(n)),
            "prompt": [f"question {i}" for i in range(n)],
            "sut_response": [REFUSE] * n,
        }
    )


# --------------------------------------------------------------------------- keys


def test_malformed_keys_are_refused_without_being_echoed():
    for bad in (KEY + "\n", " " + KEY, KEY + "é"):
        with pytest.raises(ValueError, match="api_key") as info:
            sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key=bad)
        assert KEY not in str(info.value)


def test_key_from_the_environment_is_stripped(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\n")
    seen = []

    def handler(request):
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json={"choices": [{"message": {"content": REFUSE}}]})

    client = sc.OpenAICompatible(
        model="m",
        base_url="http://x.test/v1",
        api_key_env="OPENAI_API_KEY",  # the default goes to OpenAI's host only
        transport=httpx.MockTransport(handler),
    )
    rows(1).pipe(
        sc.safety_consistency,
        sut=client,
        judge=StandInJudge(),
        responses_per_query=2,
        progress=False,
    )
    assert seen == [f"Bearer {KEY}"]


def test_transport_errors_quoting_the_key_are_scrubbed():
    def handler(request):
        raise httpx.LocalProtocolError(f"Illegal header value b'Bearer {KEY}'")

    client = sc.OpenAICompatible(
        model="m", base_url="http://x.test/v1", api_key=KEY, transport=httpx.MockTransport(handler)
    )
    out = rows(1).pipe(
        sc.safety_consistency,
        sut=client,
        judge=StandInJudge(),
        n_sut_retries=0,
        progress=False,
        allow_unscored=True,
    )
    assert KEY not in out.write_ndjson() and "<api key>" in out["sc_error"][0]


def test_model_is_required_and_url_credentials_refused():
    with pytest.raises(ValueError, match="model: required"):
        sc.OpenAICompatible(model=None, base_url="http://x.test/v1")
    with pytest.raises(ValueError, match="credentials in the URL"):
        sc.OpenAICompatible(model="m", base_url=f"https://user:{KEY}@x.test/v1")


def test_api_key_env_is_checked_up_front_and_named_not_echoed(monkeypatch):
    with pytest.raises(InputError, match="api_key, api_key_env: pass one"):
        sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key=KEY, api_key_env="K")
    for bad in ("", "A=B", "A\nB", 42):
        with pytest.raises(InputError, match="api_key_env: expected the name"):
            sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key_env=bad)
    # A variable named explicitly must hold a key where the client is made.
    monkeypatch.delenv("TEAM_KEY", raising=False)
    with pytest.raises(InputError, match="'TEAM_KEY' is not set or is empty"):
        sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key_env="TEAM_KEY")
    monkeypatch.setenv("TEAM_KEY", " \n")
    with pytest.raises(InputError, match="'TEAM_KEY' is not set or is empty"):
        sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key_env="TEAM_KEY")
    monkeypatch.setenv("TEAM_KEY", KEY + "é")
    with pytest.raises(InputError, match="api_key: the key in the environment variable 'TEAM_KEY'"):
        sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key_env="TEAM_KEY")
    # A name that does not look like one (a key pasted in its place) is never echoed.
    with pytest.raises(InputError) as info:
        sc.OpenAICompatible(model="m", base_url="http://x.test/v1", api_key_env=KEY)
    assert KEY not in str(info.value) and "name not shown" in str(info.value)


def test_api_key_env_reads_the_named_variable_stripped(monkeypatch):
    monkeypatch.setenv("TEAM_KEY", f" {KEY}\n")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-this-one-0123456789")
    seen = []

    def handler(request):
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json={"choices": [{"message": {"content": REFUSE}}]})

    client = sc.OpenAICompatible(
        model="m",
        base_url="http://x.test/v1",
        api_key_env="TEAM_KEY",
        transport=httpx.MockTransport(handler),
    )
    rows(1).pipe(sc.safety_consistency, sut=client, judge=StandInJudge(), progress=False)
    assert set(seen) == {f"Bearer {KEY}"}


def test_an_azure_deployment_name_cannot_leave_its_path_segment():
    for bad in ("", "../../other", "a/b", "d?x=1", "d#x", " d", ".."):
        with pytest.raises(InputError, match="deployment: expected an Azure deployment name"):
            sc.OpenAICompatible.azure(
                endpoint="https://res.openai.azure.com", deployment=bad, api_version="v"
            )


def test_a_client_for_openai_s_api_without_a_key_says_so_at_once(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    with pytest.raises(sc.InputError, match=r"no key for OpenAI's API.*set OPENAI_API_KEY"):
        sc.OpenAICompatible(model="gpt-4o-mini")
    with pytest.raises(sc.InputError, match="set AZURE_OPENAI_API_KEY"):
        sc.OpenAICompatible.azure(
            endpoint="https://my-resource.openai.azure.com",
            deployment="gpt4o",
            api_version="2024-06-01",
        )
    # A local server, a gateway or a proxy may take no key; a credential header is a key.
    sc.OpenAICompatible(model="m", base_url="http://localhost:8000/v1")
    sc.OpenAICompatible(model="m", headers={"Authorization": "Bearer sk-x"})
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    sc.OpenAICompatible(model="gpt-4o-mini")


@pytest.mark.parametrize(
    ("base_url", "said"),
    [
        ("http://localhost:4000", "check the /v1 part of the base URL"),
        ("http://localhost:4000/v1", "check the base URL and the model name"),
    ],
)
def test_a_404_on_the_chat_path_says_what_to_check(base_url, said):
    def not_found(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"detail": "Not Found"})

    sut = sc.OpenAICompatible(
        model="m", base_url=base_url, api_key="k", transport=httpx.MockTransport(not_found)
    )
    frame = pl.DataFrame({"input_id": ["a"], "prompt": ["q"], "sut_response": ["No."]})
    out = sc.safety_consistency(
        frame, sut=sut, judge=StandInJudge(), progress=False, allow_unscored=True
    )
    error = out["sc_error"][0]
    assert "HTTP 404" in error and said in error, error


@pytest.mark.parametrize(
    "where",
    [
        {"base_url": "http://localhost:8000/v1"},  # a local server: no key needed
        {},  # OpenAI's API, which needs one: the no-key check reads the headers
        {"azure": True},
    ],
    ids=["local", "openai", "azure"],
)
@pytest.mark.parametrize("headers", [[("a", "b")], "a: b", {"a": 1}, {1: "b"}])
def test_headers_that_are_not_a_mapping_of_strings_are_named(where, headers, monkeypatch):
    # Was: AttributeError ('tuple' object has no attribute 'lower') from the no-key check,
    # which read the headers before they were checked.
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="headers: expected a mapping"):
        if where.get("azure"):
            sc.OpenAICompatible.azure(
                endpoint="https://res.openai.azure.com",
                deployment="d",
                api_version="2024-10-21",
                headers=headers,
            )
        else:
            sc.OpenAICompatible(model="m", headers=headers, **where)


def test_every_bad_argument_is_a_safecons_error_naming_it():
    cases = [
        (lambda: sc.OpenAICompatible(model=None, base_url="http://x.test/v1"), "model"),
        (lambda: sc.OpenAICompatible(model="", base_url="http://x.test/v1"), "model"),
        (
            lambda: sc.OpenAICompatible(
                model="m", base_url="http://x.test/v1", params={"model": "x"}
            ),
            "params",
        ),
        (
            lambda: sc.OpenAICompatible(model="m", base_url="http://x.test/v1", headers=[1]),
            "headers",
        ),
        (
            lambda: sc.OpenAICompatible(
                model="m",
                base_url="http://x.test/v1",
                transport=TransportOptions(max_response_bytes=10),
            ),
            "max_response_bytes",
        ),
        (lambda: sc.CallableClient(42), "fn"),  # type: ignore[arg-type]
        (lambda: TransportOptions(http_timeout=-1), "http_timeout"),
        (lambda: TransportOptions(http_timeout="600"), "http_timeout"),  # type: ignore[arg-type]
        (lambda: TransportOptions(http_timeout=float("inf")), "http_timeout"),
        (lambda: BatchOptions(wait_seconds=-0.5), "wait_seconds"),
        (lambda: BatchOptions(poll_seconds=0), "poll_seconds"),
        (lambda: BatchOptions(cancel_on_interrupt="yes"), "cancel_on_interrupt"),  # type: ignore[arg-type]
        (
            lambda: sc.OpenAICompatible(model="m", base_url="http://x.test/v1", batch="yes"),  # type: ignore[arg-type]
            "batch",
        ),
    ]
    # Each of these was taken as given, to fail later (or never) far from where it was passed.
    for name, bad in [
        ("send_seed", "yes"),
        ("send_temperature", 1),
        ("params", 5),
        ("params", {1: "x"}),
    ]:
        cases.append(
            (
                lambda n=name, b=bad: sc.OpenAICompatible(
                    model="m", base_url="http://x.test/v1", **{n: b}
                ),
                name,
            )
        )
    for make, name in cases:
        with pytest.raises(sc.SafeconsError, match=f"^{name}") as info:
            make()
        assert isinstance(info.value, ValueError | TypeError)  # what generic code catches


def test_a_transport_is_one_of_the_named_wires_or_an_httpx_transport():
    with pytest.raises(sc.InputError, match=r"transport: expected 'auto', 'aiohttp', 'httpx'"):
        sc.OpenAICompatible(model="m", base_url="http://x.test/v1", transport="curl")
    with pytest.raises(sc.InputError, match=r"transport: expected 'auto', 'aiohttp', 'httpx'"):
        TransportOptions(via="curl")  # type: ignore[arg-type]
    made = sc.OpenAICompatible(
        model="m", base_url="http://x.test/v1", transport=httpx.MockTransport(lambda r: None)
    )
    assert isinstance(made.transport.via, httpx.MockTransport)
    assert made.transport.http_timeout == TransportOptions().http_timeout


def test_the_client_takes_at_most_twelve_keywords_none_private():
    import inspect

    for make in (sc.OpenAICompatible, sc.OpenAICompatible.azure):
        named = [
            p.name
            for p in inspect.signature(make).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        ]
        assert len(named) <= 12, named
        assert not [name for name in named if name.startswith("_")]


def test_the_former_option_keywords_are_read_with_a_warning_at_the_callers_line():
    where = {"model": "m", "base_url": "http://x.test/v1", "api_key": ""}
    with pytest.warns(DeprecatedOptionWarning, match=r"http_timeout= is now transport=") as seen:
        old = sc.OpenAICompatible(
            **where,
            http_timeout=5,
            max_response_bytes=4096,
            batch=True,
            batch_poll_seconds=1,
            batch_wait_seconds=0,
            cancel_on_interrupt=True,
        )
    assert seen[0].filename == __file__
    assert "batch_wait_seconds= is now batch=BatchOptions(wait_seconds=...)" in str(seen[0].message)
    new = sc.OpenAICompatible(
        **where,
        transport=TransportOptions(http_timeout=5, max_response_bytes=4096),
        batch=BatchOptions(poll_seconds=1, wait_seconds=0, cancel_on_interrupt=True),
    )
    assert (old.transport, old.batch) == (new.transport, new.batch)
    # What the Batch API's session reads, under the names it read before.
    assert (old.http_timeout, old.max_response_bytes) == (5.0, 4096)
    assert (old.batch_poll_seconds, old.batch_wait_seconds, old.cancel_on_interrupt) == (
        1.0,
        0.0,
        True,
    )
    with pytest.warns(DeprecatedOptionWarning):
        unbatched = sc.OpenAICompatible(**where, batch_wait_seconds=3)
    assert unbatched.batch is None and not unbatched.cancel_on_interrupt


@pytest.mark.parametrize("name", ["_url", "_deployment", "_auth_header", "_query"])
def test_the_former_private_keywords_name_the_azure_constructor(name):
    with pytest.raises(TypeError, match=r"OpenAICompatible\.azure\(endpoint="):
        sc.OpenAICompatible(model="m", base_url="http://x.test/v1", **{name: "x"})
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        sc.OpenAICompatible(model="m", base_url="http://x.test/v1", colour="x")  # type: ignore[call-arg]


def test_an_azure_client_takes_the_options_too():
    made = sc.OpenAICompatible.azure(
        endpoint="https://res.openai.azure.com",
        deployment="d",
        api_version="2024-10-21",
        api_key="k",
        transport=TransportOptions(http_timeout=7),
        batch=True,
    )
    assert made.transport.http_timeout == 7.0 and made.batch == BatchOptions()
    assert made.facts.batch


def test_the_former_direct_transport_is_read_as_aiohttp_with_a_warning():
    with pytest.warns(
        FutureWarning, match=r"transport='direct'\) is now transport='aiohttp'"
    ) as seen:
        made = sc.OpenAICompatible(model="m", base_url="http://x.test/v1", transport="direct")
    assert made.transport.via == "aiohttp"
    assert seen[0].filename == __file__  # it points at the line that made the client


class _Settings:
    """An object whose ``__getattr__`` reads a dict: a missing name is a KeyError."""

    def __init__(self) -> None:
        self._values = {"model": "m"}

    def __getattr__(self, name):
        return self._values[name]

    def __call__(self, messages, *, temperature):
        return REFUSE

    def compare(self, *, query, variant, base, candidate):
        return ("Consistent", 0.9)


@pytest.mark.parametrize(
    ("where", "arguments"),
    [
        ("sut", {"sut": _Settings(), "judge": StandInJudge()}),
        ("judge", {"sut": lambda m, *, temperature: REFUSE, "judge": _Settings()}),
        (
            r"judge\[1\]",
            {"sut": lambda m, *, temperature: REFUSE, "judge": [StandInJudge(), _Settings()]},
        ),
    ],
)
def test_an_object_whose_missing_names_raise_keyerror_is_named(where, arguments):
    # Python's tools (inspect.signature, hasattr) let only AttributeError through: such an
    # object crashed the run inside them with a bare KeyError naming no argument.
    with pytest.raises(InputError, match=rf"^{where}: _Settings raises KeyError .*AttributeError"):
        rows(1).pipe(sc.safety_consistency, cache=False, progress=False, **arguments)


def test_a_client_seen_only_through_getattr_or_class_is_still_a_client():
    # Found by a review: looking members up without running code (conforms) missed what only
    # isinstance sees, so a Mock(spec=OpenAICompatible) was wrapped as a callable and called
    # as a function, and a wrapper passing its members on was refused.
    from unittest import mock

    from safecons.clients._internal import as_chat_client

    spec = mock.Mock(spec=sc.OpenAICompatible)
    assert as_chat_client(spec, "sut") is spec

    class Passing:
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            return getattr(self._inner, name)

    wrapped = Passing(sc.OpenAICompatible(model="m", base_url="http://127.0.0.1:9/v1", api_key="k"))
    assert as_chat_client(wrapped, "sut") is wrapped


def test_a_pinned_callable_client_keeps_its_class():
    from safecons.clients._internal import as_chat_client

    class Mine(sc.CallableClient):
        pass

    client = as_chat_client(Mine(lambda messages, *, temperature: REFUSE), "sut")
    assert type(client) is Mine
