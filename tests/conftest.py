from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# The licensed test data lives beside the repository (CI lays a copy of shared/ there); it is
# never copied into the repository itself.
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
SHARED_SEEDS = REPO_ROOT.parent / "shared" / "seeds"


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared test data not found at {SHARED_DATA} (present in CI)")
    return SHARED_DATA


@pytest.fixture
def shared_seeds() -> Path:
    if not SHARED_SEEDS.is_dir():
        pytest.skip(f"spec seeds not found at {SHARED_SEEDS} (present in CI)")
    return SHARED_SEEDS


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def run_args(rows: object, output: object, base_url: str, *extra: str) -> list[str]:
    """``safecons run`` of ``rows`` to ``output`` with the SUT (model ``sut``) and the judge
    (model ``judge``) at ``base_url``, no progress bar, and ``extra`` options."""
    return [
        "run",
        str(rows),
        "--output",
        str(output),
        "--sut-model",
        "sut",
        "--sut-base-url",
        base_url,
        "--judge-model",
        "judge",
        "--judge-base-url",
        base_url,
        "--no-progress",
        *extra,
    ]


@pytest.fixture
def cli_run_args():
    """:func:`run_args`, for tests that call the command line."""
    return run_args


@pytest.fixture(scope="session")
def demo_run():
    """The metric run on the demo frame (a stand-in SUT, the offline judge): the scored run
    the report's tests read."""
    import safecons as sc
    from safecons.metric import safety_consistency_run
    from safecons.testing import StandInSUT

    return safety_consistency_run(
        sc.demo_frame(),
        sut=StandInSUT(seed=3),
        judge=sc.OfflineJudge(),
        progress=False,
        responses_per_query=3,
        dpi_ratio=0.5,
    )
