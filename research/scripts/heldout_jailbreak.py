"""Measure the offline judge against human labels of jailbreak answers (held out).

Its code, shared with other scripts, and its full description:
:mod:`safecons_research.heldout_jailbreak`.
"""

import sys

from safecons_research.heldout_jailbreak import main

if __name__ == "__main__":
    sys.exit(main())
