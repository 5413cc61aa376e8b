"""The ``simpact`` command line: every argparse parser of the project and nothing else (layer 5).

One module per command group registers its verbs (``add_parsers``). Every verb that produces results writes
``--out DIR/result.json`` and prints a one-line summary; any :class:`~simpact.core.errors.SimpactError` is
reported in one line and exits with its ``exit_code`` (2 for bad input).
"""

from __future__ import annotations

import os

# Offscreen rendering without a display: MuJoCo reads MUJOCO_GL once, when it is first imported, and the
# command groups below import it.
os.environ.setdefault("MUJOCO_GL", "egl")

import argparse  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any, NoReturn, Protocol  # noqa: E402

from simpact import __version__  # noqa: E402
from simpact.cli import audit, bench, plan, real2sim, robot, rollout  # noqa: E402
from simpact.cli.preflight import missing_package  # noqa: E402
from simpact.core.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, SimpactError  # noqa: E402

__all__ = ["build_parser", "main"]


class CommandGroup(Protocol):
    """A module of this package that registers its verbs on the ``simpact`` subparsers."""

    def add_parsers(self, verbs: Any) -> None: ...


GROUPS: tuple[CommandGroup, ...] = (rollout, plan, audit, real2sim, robot, bench)
"""The command groups, registered in this order (``simpact --help`` lists their verbs so)."""


class _Parser(argparse.ArgumentParser):
    """Bad arguments are one line (exit 2) naming the help to read, not a usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="simpact", description=__doc__)
    parser.add_argument("--version", action="version", version=f"simpact {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True)
    for group in GROUPS:
        group.add_parsers(verbs)
    return parser


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Run one verb; the exit status is :mod:`simpact.core.errors`' table (0, 2, 3, 4, 130)."""
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], None] = args.func
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt) if main_thread else None
    try:  # SIGTERM ends a run like Ctrl-C: what finished stays on disk
        func(args)
    except KeyboardInterrupt:
        out = getattr(args, "out", None)
        where = f"; what finished is in {out}" if out else ""
        print(f"simpact {args.verb}: interrupted{where}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SimpactError as exc:
        print(f"simpact {args.verb}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except FileNotFoundError as exc:
        print(f"simpact {args.verb}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ModuleNotFoundError as exc:
        fix = missing_package(exc.name or "")
        if fix is None:
            raise
        print(f"simpact {args.verb}: error: {fix}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    return 0
