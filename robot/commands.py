"""Moved: the ``simpact robot`` verbs live in :mod:`simpact.cli.robot` (``add_parsers``). This alias keeps
``simpact.cli`` working until it registers that module itself; then this file goes."""

from __future__ import annotations

from simpact.cli.robot import add_parsers as add_robot_parser

__all__ = ["add_robot_parser"]
