"""The command line documents itself: every argument has a help text, and the README's synopses (the
``simpact ...`` lines of its ```bash blocks) name only flags that exist and every flag of every verb."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from simpact.cli import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every parser under ``simpact`` by its verb path (``()``, ``("bench",)``, ``("bench", "perf")``...)."""
    found = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_parsers(sub, (*path, name)))
    return found


PARSERS = _parsers(build_parser())
VERBS = {path: p for path, p in PARSERS.items() if path and not _parsers(p).keys() - {()}}
"""The runnable verbs: parsers without subcommands of their own."""


def _flags(parser: argparse.ArgumentParser, *, hidden: bool = True) -> set[str]:
    """The ``--`` flags of ``parser``; without ``hidden``, not those with suppressed help (old aliases)."""
    return {
        s
        for a in parser._actions
        for s in a.option_strings
        if s.startswith("--") and s != "--help" and (hidden or a.help != argparse.SUPPRESS)
    }


def _synopses() -> dict[tuple[str, ...], set[str]]:
    """The flags each verb's README synopsis lines name (a line ending in ``\\`` continues)."""
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S)
    lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    named: dict[tuple[str, ...], set[str]] = {}
    for line in lines:
        words = line.split("#")[0].split()
        if words[:1] != ["simpact"]:
            continue
        path: tuple[str, ...] = ()
        for word in words[1:]:
            if (*path, word) in PARSERS:
                path = (*path, word)
        named.setdefault(path, set()).update(FLAG.findall(line.split("#")[0]))
    return named


@pytest.mark.parametrize("path", sorted(PARSERS), ids=lambda p: " ".join(p) or "simpact")
def test_every_argument_has_a_help_text(path: tuple[str, ...]) -> None:
    parser = PARSERS[path]
    missing = [
        a.option_strings or a.dest
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
        and not (a.help or "").strip()
    ]
    assert not missing, f"simpact {' '.join(path)}: no help text for {missing}"


def test_readme_synopses_name_only_flags_that_exist() -> None:
    synopses = _synopses()
    assert synopses, "no simpact synopses found in README.md"
    wrong = {
        " ".join(path): sorted(flags - _flags(PARSERS[path]) - {"--help", "--version"})
        for path, flags in synopses.items()
    }
    assert not {k: v for k, v in wrong.items() if v}


@pytest.mark.parametrize("path", sorted(VERBS), ids=lambda p: " ".join(p))
def test_every_flag_of_every_verb_is_in_the_readme(path: tuple[str, ...]) -> None:
    documented = _synopses().get(path)
    assert documented is not None, f"README.md has no synopsis of simpact {' '.join(path)}"
    missing = sorted(_flags(VERBS[path], hidden=False) - documented)
    assert not missing, f"README.md's synopsis of simpact {' '.join(path)} misses {missing}"
