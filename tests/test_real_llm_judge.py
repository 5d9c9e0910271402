"""The LLM judge against a real llama-cpp-python server: SmolLM2-135M-Instruct from PyPI.

llama-cpp-python's OpenAI-compatible server answers a ``json_schema`` response format with HTTP
500 (its request model takes ``text`` or ``json_object``, the latter with a ``schema``). The
judge must still judge every pair: its session steps down to the schema as a JSON object, which
the server enforces by grammar.

The server is built once, outside the repository (``python scripts/real_model_example.py
--setup``; ``.ci/run`` builds it where it is missing and then requires this test to run, as
``SAFECONS_REQUIRE_LLM=1``). Without the build the test skips and says how to make it.
"""

from __future__ import annotations

import os
import runpy
import subprocess
from pathlib import Path

import anyio
import polars as pl
import pytest

import safecons as sc

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = runpy.run_path(str(ROOT / "scripts" / "real_model_example.py"))
PYTHON = Path(EXAMPLE["VENV"]) / "bin" / "python"
REQUIRED = os.environ.get("SAFECONS_REQUIRE_LLM") == "1"  # set by .ci/run once it is built

# One xdist group (the README's `--dist loadgroup` runs it on one worker): the server, started
# once for the module, serves both tests.
pytestmark = [pytest.mark.slow, pytest.mark.network, pytest.mark.xdist_group("llm")]


def _built() -> bool:
    if not PYTHON.exists():
        return False
    check = subprocess.run([str(PYTHON), "-c", EXAMPLE["CHECK"]], capture_output=True, check=False)
    return check.returncode == 0


@pytest.fixture(scope="module")
def base_url():
    if not _built():
        reason = (
            f"llama-cpp-python's server is not built at {PYTHON.parent.parent} "
            "(python scripts/real_model_example.py --setup builds it, about 15 minutes)"
        )
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)
    port = EXAMPLE["free_port"]()
    server = EXAMPLE["serve"](str(PYTHON), EXAMPLE["model_file"](str(PYTHON)), port)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _judge(base_url: str) -> sc.OpenAICompatible:
    return sc.OpenAICompatible(
        model="smollm2", base_url=base_url, api_key="", params={"max_tokens": 120}
    )


@pytest.mark.timeout(600)
def test_the_session_learns_the_form_of_structured_output_the_server_takes(base_url):
    async def two_calls():
        async with _judge(base_url).session() as session:
            message = [{"role": "user", "content": 'Answer {"label": "Consistent", "score": 1}'}]
            done = []
            for _ in range(2):
                done.append(
                    await session.complete(
                        message, temperature=0.0, response_format=sc.judges.JUDGE_RESPONSE_FORMAT
                    )
                )
                done.append(session.format_step)
            return done

    first, step_after_first, second, step_after_second = anyio.run(two_calls)
    # Step 1 of the ladder: the judge's schema as {"type": "json_object", "schema": ...}.
    assert step_after_first == step_after_second == 1
    for completion in (first, second):
        parsed = sc.judges.parse_judgment(completion.text)
        assert isinstance(parsed, sc.Judgment), completion.text


@pytest.mark.timeout(900)
def test_audit_judge_judges_every_pair_on_a_real_llama_cpp_python_server(base_url):
    golden = sc.golden_set()
    # Two pairs of each gold label: every pair of what it is given must get a verdict (the
    # whole golden set is audited by research/scripts/audit_real_judge.py: docs/judges.md).
    some = golden.filter(pl.int_range(pl.len()).over("gold") < 2)
    audit = sc.audit_judge(
        _judge(base_url),
        some,
        repeats=1,
        swap=False,
        probes=False,
        concurrency_limit=1,
        timeout_seconds=300,
        cache=False,
        progress=False,
    )
    calls = audit.calls
    assert calls.height == some.height == 6
    assert calls["error"].null_count() == calls.height, calls["error"].to_list()
    row = audit.table.filter(slice="all").row(0, named=True)
    assert row["n_judged"] == row["n"] == 6
