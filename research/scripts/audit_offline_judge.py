"""Audit the offline judge on the golden set: the tables of docs/judges.md.

Its code, shared with other scripts, and its full description:
:mod:`safecons_research.audit_offline_judge`.
"""

import sys

from safecons_research.audit_offline_judge import main

if __name__ == "__main__":
    sys.exit(main())
