"""The offline judge on jailbreak answers it may be tuned on: HarmBench's human labels, out of fold.

Its code, shared with other scripts, and its full description:
:mod:`safecons_research.jailbreak_dev`.
"""

import sys

from safecons_research.jailbreak_dev import main

if __name__ == "__main__":
    sys.exit(main())
