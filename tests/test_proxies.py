"""Every path a client posts by honours HTTP(S)_PROXY, ALL_PROXY and NO_PROXY as httpx does:
behind a company proxy, live calls must not try to go direct (they did on the default path)."""

from __future__ import annotations

import polars as pl
import pytest

import safecons as sc
from safecons.testing import StandInJudge
from safecons.testing.hostile import ScriptedServer, reply

pytestmark = pytest.mark.network

TRANSPORTS = ["auto", "aiohttp", "httpx"]
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture
def clean_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return monkeypatch


def one_row(sut) -> pl.DataFrame:
    df = pl.DataFrame({"input_id": [1], "prompt": ["q"], "sut_response": ["I can't."]})
    return df.pipe(
        sc.safety_consistency,
        sut=sut,
        judge=StandInJudge(),
        responses_per_query=2,
        n_sut_retries=0,
        cache=False,
        progress=False,
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_calls_go_through_the_proxy_the_environment_names(clean_env, transport):
    with ScriptedServer(lambda seen: reply("I can't help.")) as proxy:
        clean_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        # A host no resolver knows: only a proxy can reach it.
        sut = sc.OpenAICompatible(
            model="m", base_url="http://model.invalid:9/v1", api_key="", transport=transport
        )
        out = one_row(sut)
        hosts = [
            {k.lower(): v for k, v in seen.headers.items()}.get("host") for seen in proxy.requests
        ]
    assert out["sc_error"].to_list() == [None]
    assert hosts == ["model.invalid:9"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_no_proxy_sends_its_hosts_direct(clean_env, transport):
    with (
        ScriptedServer(lambda seen: reply("from the proxy")) as proxy,
        ScriptedServer(lambda seen: reply("I can't help.")) as server,
    ):
        clean_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        clean_env.setenv("NO_PROXY", "127.0.0.1")
        sut = sc.OpenAICompatible(
            model="m", base_url=server.base_url, api_key="", transport=transport
        )
        out = one_row(sut)
        through_proxy, direct = len(proxy.requests), len(server.requests)
    assert out["sc_error"].to_list() == [None]
    assert (through_proxy, direct) == (0, 1)


def test_a_socks_proxy_the_aiohttp_paths_cannot_use_is_warned_and_skipped(clean_env):
    from safecons.clients._proxy import environment_proxy

    clean_env.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    with pytest.warns(RuntimeWarning, match="socks5 proxy"):
        assert environment_proxy("http://example.test/v1") is None


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_batches_go_through_the_proxy_too(clean_env, transport, tmp_path):
    """The Batch API's requests (upload, create, poll, read) take the client's own wire:
    its proxy, its transport."""
    from safecons.testing import FakeOpenAIServer

    with FakeOpenAIServer(responder=lambda body: "I can't help with that.") as proxy:
        clean_env.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        sut = sc.OpenAICompatible(
            model="m",
            base_url="http://model.invalid:9/v1",  # only the proxy can reach it
            api_key="",
            transport=transport,
            batch=sc.clients.BatchOptions(poll_seconds=0.05, wait_seconds=0.25),
        )
        df = pl.DataFrame({"input_id": [1], "prompt": ["q"], "sut_response": ["I can't."]})
        out = df.pipe(
            sc.safety_consistency,
            sut=sut,
            judge=StandInJudge(),
            responses_per_query=2,
            cache=tmp_path / "calls.sqlite",
            progress=False,
        )
        batches = proxy.batches()
    assert out["sc_error"].to_list() == [None]
    assert len(batches) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_socks_proxy_is_used_or_the_run_stops_never_gone_around(clean_env, transport):
    """A SOCKS proxy the aiohttp wire cannot use: the default goes by httpx's own transport
    (which can, with httpx[socks]); nothing goes direct, live or batch."""
    import importlib.util
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    hits: list[int] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            hits.append(1)
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    try:
        with ScriptedServer(lambda seen: reply("I can't help.")) as server:
            clean_env.setenv("ALL_PROXY", f"socks5://127.0.0.1:{listener.getsockname()[1]}")
            sut = sc.OpenAICompatible(
                model="m", base_url=server.base_url, api_key="", transport=transport
            )
            if transport == "aiohttp":
                with pytest.raises(sc.ConfigError, match="transport='aiohttp' cannot use"):
                    one_row(sut)
            elif importlib.util.find_spec("socksio") is None:
                with pytest.raises(sc.ConfigError, match=r"pip install 'httpx\[socks\]'"):
                    one_row(sut)
            else:
                out = one_row(sut)
                assert out["sc_error"][0] is not None and hits  # the proxy, not the server
            direct = len(server.requests)
    finally:
        listener.close()
    assert direct == 0  # never around the proxy
