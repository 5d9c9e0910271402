"""The version of safecons (read by the build, the CLI and the report)."""

__version__ = "0.1.0"
