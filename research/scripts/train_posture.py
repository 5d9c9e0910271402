"""Train the posture classifier (complied vs refused), measure it, and ship it as plain arrays.

Its code, shared with other scripts, and its full description:
:mod:`safecons_research.train_posture`.
"""

import sys

from safecons_research.train_posture import main

if __name__ == "__main__":
    sys.exit(main())
