"""Train the harm head (harmful or toxic content vs harmless), measure it, ship it as arrays.

Its code, shared with other scripts, and its full description:
:mod:`safecons_research.train_harm`.
"""

import sys

from safecons_research.train_harm import main

if __name__ == "__main__":
    sys.exit(main())
