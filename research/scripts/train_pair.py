"""Train the pair model (posture given the query), measure it, and ship it as plain arrays.

Its code, shared with other scripts, and its full description:
:mod:`safecons_research.train_pair`.
"""

import sys

from safecons_research.train_pair import main

if __name__ == "__main__":
    sys.exit(main())
