"""The one error base of the project: every error a user can cause or meet derives from :class:`SimpactError`.

The command line reports any :class:`SimpactError` as one line and exits with its ``exit_code`` (2, bad
input or configuration, unless a subclass says otherwise), so no list of error types is kept by hand.
"""

from __future__ import annotations

__all__ = ["EXIT_BAD_INPUT", "EXIT_ROBOT_STOPPED", "SimpactError", "UsageError"]

EXIT_BAD_INPUT = 2
"""Exit status for bad input or configuration."""
EXIT_ROBOT_STOPPED = 3
"""Exit status when the robot stopped with an error during a plan."""


class SimpactError(Exception):
    """Base of every project error. ``exit_code`` is the command line's exit status for it."""

    exit_code: int = EXIT_BAD_INPUT


class UsageError(SimpactError, ValueError):
    """Bad input from the user (a flag, a path, a value): reported in one line, exit status 2."""
