"""WildGuardTest (Han et al. 2024, ODC-BY 1.0), read from its copy in the mirror at a pinned
commit: the development runs of the judges and the compact copy notebook 02 calibrates with
both read it here."""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl

from safecons_research import public_data

#: (repository, commit, path) of the copy read.
WILDGUARD = (
    "sharzilnfz/llmSafetyClassification",
    "ff7f31b8d46fe09fbb5f82a4b805864048e0c2ef",
    "data/wildguardtest.parquet",
)


def rows(mirror: Path | str) -> pl.DataFrame:
    """WildGuardTest: prompt, response, adversarial and the three human labels."""
    repo, commit, path = WILDGUARD
    return pl.read_parquet(io.BytesIO(public_data.git_show(mirror, repo, commit, path)))
