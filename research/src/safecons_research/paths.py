"""Where the research folder finds the repository, the shared data and the shipped weights.

The package is installed editable from the repository (``pip install -e research``), so the
repository is three folders above this file.
"""

from __future__ import annotations

from pathlib import Path

#: The repository's root (the folder holding ``src/safecons`` and ``research``).
REPO = Path(__file__).resolve().parents[3]
#: The research folder.
RESEARCH = REPO / "research"
#: The shared data (public sets; the README there), beside the repository.
SHARED_DATA = REPO.parent / "shared" / "data"
#: Where the shipped weights are written.
WEIGHTS = REPO / "src" / "safecons" / "data"
