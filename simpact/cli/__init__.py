"""The ``simpact`` command line: every argparse parser of the project and nothing else (layer 5).

One module per command group registers its verbs (``add_parsers``). Every verb that produces results writes
``--out DIR/result.json`` and prints a one-line summary; any :class:`~simpact.core.errors.SimpactError` is
reported in one line and exits with its ``exit_code`` (2 for bad input).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from simpact.cli import bench, rollout
from simpact.core.errors import EXIT_BAD_INPUT, SimpactError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simpact", description=__doc__)
    verbs = parser.add_subparsers(dest="verb", required=True)
    rollout.add_parsers(verbs)

    from simpact.guard.commands import add_audit_parser

    add_audit_parser(verbs)

    from robot.commands import add_robot_parser

    add_robot_parser(verbs)

    from simpact.planner.commands import add_plan_parser

    add_plan_parser(verbs)

    from real2sim.commands import add_real2sim_parser

    add_real2sim_parser(verbs)
    bench.add_parsers(verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("MUJOCO_GL", "egl")  # offscreen rendering without a display; read at mujoco import
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], None] = args.func
    try:
        func(args)
    except SimpactError as exc:
        print(f"simpact {args.verb}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except FileNotFoundError as exc:
        print(f"simpact {args.verb}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return 0
