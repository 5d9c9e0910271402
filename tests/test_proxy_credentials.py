"""A proxy's credentials are secrets as the API key is: never stored, printed or quoted.

Real proxies on loopback: one that answers ``CONNECT`` with 407 (aiohttp's error text quoted
the proxy URL, password and all), and one that forwards a plain-http request and echoes its
headers (``Proxy-Authorization`` is sent in the request itself). Every place a run's text
ends up is read: the frame, the response cache's bytes, a Parquet file, the HTML report and
the CLI's output. Then the proxy URL that does not parse, and a key refused over plain http.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import pickle
import socket
import threading
import traceback
import urllib.parse
from pathlib import Path

import polars as pl
import pytest

import safecons as sc
from safecons.cli import main as cli
from safecons.testing import StandInJudge
from safecons.testing.hostile import ScriptedServer, Seen, reply

USER = "proxy-user"
PASSWORD = "s3cret#Proxy@PW/0123"  # '#', '@' and '/' are written percent-encoded in a URL
QUOTED = urllib.parse.quote(PASSWORD, safe="")
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
KEY = "sk-proj-RUN-KEY-0123456789abcdefghijklmnop"
REFUSE = "I'm sorry, but I can't help with that."
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


def proxy_url(port: int) -> str:
    return f"http://{USER}:{QUOTED}@127.0.0.1:{port}"


def leaks(text: str) -> list[str]:
    """Every 10-character piece of the password, in any form, or of the key, in ``text``."""
    forms = (PASSWORD, QUOTED, BASIC, f"{USER}:{PASSWORD}", KEY)
    return [
        form[i : i + 10] for form in forms for i in range(len(form) - 9) if form[i : i + 10] in text
    ]


@pytest.fixture
def clean_env(monkeypatch):
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    return monkeypatch


class RefusingProxy:
    """A proxy on 127.0.0.1 answering every request (``CONNECT`` included) with 407."""

    def __enter__(self) -> RefusingProxy:
        self.seen: list[bytes] = []
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    head += chunk
                self.seen.append(head)
                conn.sendall(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b'Proxy-Authenticate: Basic realm="corp"\r\n'
                    b"Content-Length: 0\r\nConnection: close\r\n\r\n"
                )

    def __exit__(self, *exc: object) -> None:
        self._listener.close()


def frame() -> pl.DataFrame:
    return pl.DataFrame({"input_id": [1], "prompt": ["q"], "sut_response": [REFUSE]})


def scored(sut: sc.OpenAICompatible, cache: Path) -> pl.DataFrame:
    return frame().pipe(
        sc.safety_consistency,
        sut=sut,
        judge=StandInJudge(),
        responses_per_query=2,
        n_sut_retries=0,
        cache=cache,
        progress=False,
        allow_unscored=True,  # a refusing proxy leaves no row scored
    )


def artifacts(out: pl.DataFrame, tmp_path: Path) -> dict[str, str]:
    """Every text a run leaves: the frame, a Parquet file (uncompressed, read as bytes and
    back), the HTML report, and every file in ``tmp_path`` (the cache)."""
    parquet = tmp_path / "scored.parquet"
    out.write_parquet(parquet, compression="uncompressed")
    page = tmp_path / "report.html"
    sc.report(out, page)
    texts = {"frame": out.write_ndjson(), "parquet read": pl.read_parquet(parquet).write_ndjson()}
    for path in tmp_path.iterdir():
        texts[path.name] = path.read_bytes().decode("latin-1")
    return texts


def cli_run(tmp_path: Path, base_url: str, *extra: str) -> tuple[str, int]:
    rows = tmp_path / "rows.parquet"
    frame().write_parquet(rows)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = cli(
            [
                "run",
                str(rows),
                "--output",
                str(tmp_path / "cli-out.jsonl"),
                "--sut-model",
                "m",
                "--sut-base-url",
                base_url,
                "--judge-model",
                "j",
                "--judge-base-url",
                base_url,
                "--no-progress",
                "--set",
                "n_judge_retries=0",
                "--set",
                "n_sut_retries=0",
                "--set",
                "responses_per_query=2",
                *extra,
            ]
        )
    return printed.getvalue(), code


@pytest.mark.network
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_proxy_refusing_connect_with_407_never_shows_its_password(clean_env, tmp_path, transport):
    with RefusingProxy() as proxy:
        clean_env.setenv("HTTPS_PROXY", proxy_url(proxy.port))
        sut = sc.OpenAICompatible(
            model="m", base_url="https://model.invalid/v1", api_key=KEY, transport=transport
        )
        out = scored(sut, tmp_path / "calls.sqlite")
        texts = artifacts(out, tmp_path)
        texts["cli"], _ = cli_run(tmp_path, "https://model.invalid/v1")
        asked = b"".join(proxy.seen)
    assert asked.startswith(b"CONNECT model.invalid:443")
    assert BASIC.encode() in asked  # the proxy was sent its credentials: they were read
    assert "407" in out["sc_error"][0], out["sc_error"][0]
    assert "most common row errors" in texts["cli"] and "407" in texts["cli"], texts["cli"]
    for name, text in texts.items():
        assert not leaks(text), f"the proxy's credentials leaked into {name}: {leaks(text)[:3]}"


@pytest.mark.network
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_proxy_echoing_proxy_authorization_is_scrubbed_like_the_key(
    clean_env, tmp_path, transport
):
    clean_env.setenv("RUN_KEY", KEY)  # the CLI's key

    def echo(seen: Seen):
        sent = json.dumps(seen.headers)
        if seen.model == "j":  # the CLI's judge: a verdict whose reason echoes the headers
            return reply(json.dumps({"label": "Consistent", "score": 0.9, "reason": sent}))
        return reply(f"{REFUSE} You sent {sent}")

    with ScriptedServer(echo) as proxy:
        clean_env.setenv("HTTP_PROXY", proxy_url(proxy.port))
        # Plain http to a loopback name, so the key may go, through the proxy.
        sut = sc.OpenAICompatible(
            model="m", base_url="http://localhost:9/v1", api_key=KEY, transport=transport
        )
        out = scored(sut, tmp_path / "calls.sqlite")
        texts = artifacts(out, tmp_path)
        texts["cli"], _ = cli_run(
            tmp_path,
            "http://localhost:9/v1",
            "--sut-key-env",
            "RUN_KEY",
            "--judge-key-env",
            "RUN_KEY",
        )
        texts["cli output"] = (tmp_path / "cli-out.jsonl").read_text()
        sent = proxy.requests[0].headers
    assert f"Basic {BASIC}" in sent.values()  # the echo held the credential
    answer = out["sc_responses"][0][0]
    assert "Proxy-Authorization" in answer and "<api key>" in answer, answer
    for name, text in texts.items():
        assert not leaks(text), f"the proxy's credentials leaked into {name}: {leaks(text)[:3]}"


# ------------------------------------------------------------------- a proxy URL that won't parse

BAD_PASSWORD = "pa#ss-SECRET-0042"


@pytest.mark.parametrize("variable", ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "HTTP_PROXY"])
@pytest.mark.parametrize("transport", ["aiohttp", "httpx"])
def test_a_proxy_url_that_does_not_parse_names_its_variable_never_the_password(
    clean_env, variable, transport
):
    clean_env.setenv(variable, f"http://{USER}:{BAD_PASSWORD}@127.0.0.1:3128")
    sut = sc.OpenAICompatible(
        model="m", base_url="https://model.invalid/v1", api_key="", transport=transport
    )
    with pytest.raises(sc.InputError) as info:
        frame().pipe(sc.safety_consistency, sut=sut, judge=StandInJudge(), progress=False)
    message = str(info.value)
    assert message.startswith(f"{variable}: "), message
    assert "%23" in message and "user:password@" in message, message  # what was expected
    shown = "".join(traceback.format_exception(info.value))
    for piece in ("SECRET-0042", "pa#ss", "ss-SECRET"):
        assert piece not in shown, shown


@pytest.mark.parametrize(
    "value",
    [
        f"http://{USER}:pa ss-SECRET-0042@proxy:3128",  # whitespace
        f"http://{USER}:pa?ss-SECRET-0042@proxy:3128",  # '?' ends the authority early
        f"http://{USER}:pa/ss-SECRET-0042@proxy:3128",  # so does '/'
        f"http://{USER}:SECRET-0042@proxy:99999",  # a bad port
        f"ftp://{USER}:SECRET-0042@proxy:21",  # a scheme httpx refuses, quoting the URL
    ],
)
def test_every_malformed_proxy_url_is_refused_without_quoting_it(clean_env, value):
    from safecons.clients._proxy import environment_proxy

    clean_env.setenv("HTTPS_PROXY", value)
    with pytest.raises(sc.InputError, match=r"^HTTPS_PROXY: ") as info:
        environment_proxy("https://api.openai.com/v1")
    shown = "".join(traceback.format_exception(info.value))
    assert "SECRET-0042" not in shown, shown


def test_well_formed_proxy_urls_are_read_as_httpx_reads_them(clean_env):
    from safecons.clients._proxy import environment_proxy

    clean_env.setenv("HTTPS_PROXY", f"http://{USER}:{QUOTED}@proxy.corp:3128")
    clean_env.setenv("HTTP_PROXY", "proxy.corp:8080")  # no scheme: http://, as httpx reads it
    assert environment_proxy("https://x.test/v1") == f"http://{USER}:{QUOTED}@proxy.corp:3128"
    assert environment_proxy("http://x.test/v1") == "http://proxy.corp:8080"


def test_proxy_credentials_join_every_clients_secrets(clean_env):
    clean_env.setenv("HTTPS_PROXY", f"http://{USER}:{QUOTED}@proxy.corp:3128")
    secrets = sc.OpenAICompatible(model="m", base_url="https://x.test/v1", api_key="").secrets
    said = f"{PASSWORD} {QUOTED} {BASIC} {USER}:{QUOTED} Basic {BASIC[:20]}"
    assert not leaks(secrets.scrub(said)), secrets.scrub(said)


def test_a_runs_secrets_hold_the_proxies_credentials_whatever_its_clients(clean_env):
    """A Python SUT whose own HTTP library reads the same proxy variables, and says the
    proxy's URL in its error: the run scrubs it as it scrubs a key."""
    url = f"http://{USER}:{QUOTED}@proxy.corp:3128"
    clean_env.setenv("HTTPS_PROXY", url)

    def sut(messages, *, temperature):
        raise ConnectionError(f"407 from {url} (Proxy-Authorization: Basic {BASIC})")

    out = frame().pipe(
        sc.safety_consistency,
        sut=sut,
        judge=StandInJudge(),
        n_sut_retries=0,
        progress=False,
        allow_unscored=True,
    )
    assert "407 from" in out["sc_error"][0] and not leaks(out.write_ndjson()), out["sc_error"][0]


# ------------------------------------------------------------------- keys over plain http


@pytest.mark.parametrize(
    "make",
    [
        lambda: sc.OpenAICompatible(model="m", base_url="http://api.openai.com/v1"),
        lambda: sc.OpenAICompatible(model="m", base_url="http://gw.example/v1", api_key=KEY),
        lambda: sc.OpenAICompatible(
            model="m", base_url="http://gw.example/v1", api_key_env="OPENAI_API_KEY"
        ),
        lambda: sc.OpenAICompatible(
            model="m", base_url="http://10.0.0.7:8000/v1", headers={"Authorization": KEY}
        ),
        lambda: sc.OpenAICompatible.azure(
            endpoint="http://res.openai.azure.com",
            deployment="d",
            api_version="2024-10-21",
            api_key=KEY,
        ),
    ],
    ids=["OPENAI_API_KEY", "api_key", "api_key_env", "headers", "azure"],
)
def test_a_key_is_never_sent_over_plain_http_to_another_host(clean_env, make):
    clean_env.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(sc.InputError) as info:
        make()
    message = str(info.value)
    assert "plain http" in message and "https" in message and "loopback" in message, message
    assert not leaks(message)


@pytest.mark.parametrize(
    "base_url",
    [
        "http://127.0.0.1:8000/v1",
        "http://127.8.9.10:8000/v1",
        "http://localhost:8000/v1",
        "http://LOCALHOST:8000/v1",
        "http://[::1]:8000/v1",
        "https://gw.example/v1",
    ],
)
def test_a_key_may_go_over_https_or_to_a_loopback_host(clean_env, base_url):
    assert sc.OpenAICompatible(model="m", base_url=base_url, api_key=KEY).base_url


def test_no_key_over_plain_http_is_fine(clean_env):
    assert sc.OpenAICompatible(model="m", base_url="http://gw.example/v1").base_url


def test_a_key_that_appears_where_the_client_is_unpickled_is_refused_before_any_call(clean_env):
    clean_env.setenv("OPENAI_BASE_URL", "http://gw.example/v1")  # OPENAI_API_KEY goes there
    client = sc.OpenAICompatible(model="m")  # made where the variable is unset: no key
    clean_env.setenv("OPENAI_API_KEY", KEY)
    there = pickle.loads(pickle.dumps(client))
    with pytest.raises(sc.ConfigError, match="plain http") as info:
        frame().pipe(sc.safety_consistency, sut=there, judge=StandInJudge(), progress=False)
    assert not leaks("".join(traceback.format_exception(info.value)))
