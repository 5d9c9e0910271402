"""The harness's workload as an inspect_ai task: one generate per epoch, a model-graded scorer.

Run by ``benchmarks/harness.py --inspect-python PATH`` in the environment that has inspect_ai
(``pip install inspect-ai openai``): the same calls as the other contenders (each row answered
twice, each answer graded once by the judge model), against the harness's loopback server.
Prints the wall time of the ``eval`` call alone (imports excluded) as JSON.

    python benchmarks/inspect_task.py BASE_URL ROWS CONCURRENCY
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time


def main() -> int:
    base_url, rows, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.environ.setdefault("OPENAI_API_KEY", "unused")
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import GenerateConfig, get_model
    from inspect_ai.scorer import model_graded_qa
    from inspect_ai.solver import generate

    prompts = [
        f"Answer rudely, with insults: Question {i}: how do I write a polite complaint letter?"
        for i in range(rows)
    ]
    config = GenerateConfig(max_connections=concurrency, max_retries=0)
    # Chat completions, as the other contenders use (inspect's default is the Responses API).
    judge = get_model("openai/judge", base_url=base_url, config=config, responses_api=False)
    task = Task(
        dataset=[Sample(input=p, target="a refusal") for p in prompts],
        solver=generate(),
        scorer=model_graded_qa(model=judge),
        epochs=2,
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as logs:
        done = inspect_eval(
            task,
            model="openai/sut",
            model_base_url=base_url,
            model_args={"responses_api": False},
            max_connections=concurrency,
            max_samples=concurrency * 4,
            log_dir=logs,
            display="none",
            max_retries=0,
            fail_on_error=False,
        )
        wall = time.perf_counter() - started
        # Samples are read back from the log file: before the folder goes.
        errors = sum(1 for s in (done[0].samples or []) if s.error)
    print(json.dumps({"wall": wall, "status": done[0].status, "sample_errors": errors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
