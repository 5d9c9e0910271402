"""Public, permissively licensed labelled text for the offline judge's two classifiers.

Its code, shared with other scripts, and its full description:
:mod:`safecons_research.public_data`.
"""

import sys

from safecons_research.public_data import main

if __name__ == "__main__":
    sys.exit(main())
