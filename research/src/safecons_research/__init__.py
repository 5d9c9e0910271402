"""The research behind safecons' offline judge: training the shipped models, probing them, and
measuring them on held-out human labels. Not part of the package: see ``research/README.md``."""
