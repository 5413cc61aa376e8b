"""The one error base of the project: every error a user can cause or meet derives from :class:`SimpactError`.

The command line reports any :class:`SimpactError` as one line and exits with its ``exit_code`` (2, bad
input or configuration, unless a subclass says otherwise), so no list of error types is kept by hand.
"""

from __future__ import annotations

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_DONE",
    "EXIT_INTERRUPTED",
    "EXIT_ROBOT_STOPPED",
    "EXIT_SERVICE_FAILED",
    "ServiceError",
    "SimpactError",
    "UsageError",
]

# The command line's exit statuses, one table (README "Exit codes").
EXIT_DONE = 0
"""The command did its job, whatever the task's outcome."""
EXIT_BAD_INPUT = 2
"""Bad input or configuration: nothing was run, or the run stopped at the first bad value."""
EXIT_ROBOT_STOPPED = 3
"""The robot stopped with an error during a plan."""
EXIT_SERVICE_FAILED = 4
"""An external service failed: the VLM unreachable, authentication refused, a replay miss."""
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM: what was finished is on disk, the result says ``interrupted``."""


class SimpactError(Exception):
    """Base of every project error. ``exit_code`` is the command line's exit status for it."""

    exit_code: int = EXIT_BAD_INPUT


class UsageError(SimpactError, ValueError):
    """Bad input from the user (a flag, a path, a value): reported in one line, exit status 2."""


class ServiceError(SimpactError):
    """An external service the command needs failed (a VLM server, an API): exit status 4."""

    exit_code = EXIT_SERVICE_FAILED
