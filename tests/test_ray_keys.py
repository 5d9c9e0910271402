"""The key recipe of docs/scale-out.md, in Ray's local mode: a key exported where Ray starts
reaches every actor through a client made with ``api_key_env``, and never Ray's files.

Skipped when Ray is not installed, as tests/test_ray.py is (SAFECONS_REQUIRE_RAY=1 makes the
skip a failure). A Ray instance of its own (``address="local"``, a temp folder of its own), so
the search of Ray's files sees this test's session alone.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

import polars as pl
import pytest

import safecons as sc
from safecons.testing import FakeOpenAIServer, route_by_model

if os.environ.get("SAFECONS_REQUIRE_RAY") == "1":
    import ray.data
else:
    ray = pytest.importorskip(
        "ray", reason="Ray is not installed: pip install 'safecons[ray]' to run the Ray tests"
    )
    pytest.importorskip("ray.data", reason="Ray Data is not installed: pip install 'ray[data]'")

import ray.cloudpickle

import safecons.ray as scr

# One Ray at a time on the machine: the group of tests/test_ray.py, which says why.
pytestmark = [
    pytest.mark.network,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.xdist_group("ray"),
]

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

VAR = "SAFECONS_TEST_GATEWAY_KEY"
LATE_VAR = "SAFECONS_TEST_LATE_KEY"
KEY = "sk-exported-NEVER-IN-RAY-FILES-0123456789"
CONTROL = "sk-runtime-env-LOGGED-BY-RAY-9876543210"
REFUSE = "I'm sorry, I can't help with that."
VERDICT = json.dumps({"label": "Consistent", "score": 0.9, "reason": "both refuse"})


def files_holding(root: str, text: str) -> list[str]:
    """The files under ``root`` (symlinks not followed) whose bytes contain ``text``."""
    needle = text.encode()
    found = []
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            try:
                with open(path, "rb") as f:
                    if needle in f.read():
                        found.append(os.path.relpath(path, root))
            except OSError:
                continue
    return found


def test_a_key_exported_where_ray_starts_reaches_the_actors_and_no_ray_file(monkeypatch):
    # Short: Ray's socket paths live under it, and a Unix socket's path is limited in length.
    temp = tempfile.mkdtemp(prefix="sc-ray-", dir="/tmp")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    # The recipe: the variable is in the environment of the process that starts Ray, which
    # every node's workers inherit; nothing names it to Ray.
    monkeypatch.setenv(VAR, KEY)
    ray.init(
        address="local",
        num_cpus=4,  # Ray's count, as in tests/test_ray.py, which says why
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        _temp_dir=temp,
        runtime_env={"env_vars": {"RAY_DATA_DISABLE_PROGRESS_BARS": "1"}},
    )
    try:
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False

        # The control: a key given through runtime_env (what the docs used to recommend) is
        # written to Ray's logs, so the search below does find a key that is there.
        @ray.remote(runtime_env={"env_vars": {"SAFECONS_TEST_CONTROL": CONTROL}})
        def read_control() -> str | None:
            return os.environ.get("SAFECONS_TEST_CONTROL")

        assert ray.get(read_control.remote()) == CONTROL

        responder = route_by_model({"sut": lambda body: REFUSE, "judge": lambda body: VERDICT})
        with FakeOpenAIServer(responder=responder, api_key=KEY) as srv:
            sut = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key_env=VAR)
            judge = sc.OpenAICompatible(model="judge", base_url=srv.base_url, api_key_env=VAR)
            assert KEY.encode() not in ray.cloudpickle.dumps(sut)
            # Gone from the driver: what the actors send is their own inherited copy.
            monkeypatch.delenv(VAR)
            rows = pl.DataFrame(
                {"input_id": [0, 1], "prompt": ["q0", "q1"], "sut_response": [REFUSE] * 2}
            )
            scored = scr.safety_consistency(
                ray.data.from_arrow(rows.to_arrow()),
                sut=sut,
                judge=judge,
                actors=1,
                responses_per_query=2,
                validate=False,  # the rows are known good; the check pass is a second job
            )
            batches = scored.iter_batches(batch_format="pyarrow", batch_size=None)
            out = pl.concat([pl.from_arrow(b) for b in batches])
            requests = srv.stats.requests
        assert out["sc_error"].null_count() == 2, out["sc_error"].to_list()
        assert out["safety_consistency"].to_list() == [0.9, 0.9]
        assert requests == 4  # each row: one SUT sample and its judgement, with the key

        # A variable the driver has and the actors do not (exported after Ray started): the
        # actor's session fails as it opens, naming the variable, and no call is made.
        monkeypatch.setenv(LATE_VAR, KEY)
        with FakeOpenAIServer(responder=responder, api_key=KEY) as srv:
            late = sc.OpenAICompatible(model="sut", base_url=srv.base_url, api_key_env=LATE_VAR)
            job = scr.safety_consistency(
                ray.data.from_arrow(rows.to_arrow()),
                sut=late,
                judge=late,
                actors=1,
                validate=False,
            )
            with pytest.raises(Exception) as info:  # Ray's wrapper of the actor's ConfigError
                job.materialize()
            assert srv.stats.requests == 0
        message = str(info.value)
        assert f"{LATE_VAR!r} is not set" in message and "where the client was unpickled" in message
        assert KEY not in message
    finally:
        ray.shutdown()
    try:
        assert files_holding(temp, CONTROL), "the control key is in none of Ray's files"
        assert not files_holding(temp, KEY)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
