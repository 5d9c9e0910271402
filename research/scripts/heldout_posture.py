"""Measure the posture classifier and the offline judge on two public held-out sets.

Its code, shared with other scripts, and its full description:
:mod:`safecons_research.heldout_posture`.
"""

import sys

from safecons_research.heldout_posture import main

if __name__ == "__main__":
    sys.exit(main())
