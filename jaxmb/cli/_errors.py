"""The command line's own errors: each becomes one ``jaxmb: error: ...`` line."""

from __future__ import annotations


class CommandError(Exception):
    """A user error found by a command (exit status 1)."""

    exit_status = 1


class UsageError(CommandError):
    """Bad arguments (exit status 2, as argparse's own usage errors)."""

    exit_status = 2
