"""One CALVIN subtask family in mode ``simpact-offline``, measured on its own: for each evaluation chain (of
the first ``--chains``) that holds the subtask, reset, run the subtasks before it with the privileged
scripted motions (:func:`simpact.calvin.evaluate.scripted_policy`), then the subtask with SIMPACT; CALVIN's
check judges it. One JSON line per attempt, then ``successes/attempts``; a chain whose scripted prefix
fails is skipped (said in its line), not counted.

```
python -m simpact.bench.calvin_family TASK [TASK ...] [--chains 40] [--max 3] [--out FILE]
```
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from simpact.bench.calvin_simpact import simpact_offline_policy
from simpact.calvin.data import Chain, load_chains
from simpact.calvin.env import CalvinEnv
from simpact.calvin.evaluate import evaluate_chain, scripted_policy

__all__ = ["family_attempts", "holding_chains"]


def holding_chains(task: str, chains: Sequence[Chain]) -> list[tuple[Chain, int]]:
    """The chains holding ``task``, with its index in each (its first occurrence)."""
    return [(c, list(c.sequence).index(task)) for c in chains if task in c.sequence]


def _mixed(k: int) -> Callable[[Any, str, str], None]:
    """The scripted policy for a chain's first ``k`` subtasks, then ``simpact-offline``."""
    done = [0]

    def act(env: Any, task: str, instruction: str) -> None:
        done[0] += 1
        policy = scripted_policy if done[0] <= k else simpact_offline_policy
        policy(env, task, instruction)

    return act


def family_attempts(
    env: Any,
    task: str,
    chains: Sequence[Chain],
    most: int,
    emit: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Up to ``most`` attempts at ``task`` (see the module docstring), one record each (``emit``: called
    with each as it finishes): chain, index, ``prefix_ok``, ``success`` and the subtask's record (with
    what the policy planned)."""
    out: list[dict[str, Any]] = []
    for chain, k in holding_chains(task, chains):
        if len(out) >= most:
            break
        cut = dataclasses.replace(chain, sequence=chain.sequence[: k + 1])
        record = evaluate_chain(env, cut, _mixed(k))
        prefix_ok = record["completed"] >= k
        row = {"task": task, "chain": chain.index, "index": k, "prefix_ok": prefix_ok,
               "success": record["completed"] == k + 1}  # fmt: skip
        if prefix_ok:
            row["subtask"] = record["subtasks"][k]
        out.append(row)
        if emit is not None:
            emit(row)
    return out


def _write(row: dict[str, Any], sink: TextIO | None) -> None:
    line = json.dumps(row, default=str)
    print(line, flush=True)
    if sink is not None:
        sink.write(line + "\n")
        sink.flush()


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simpact.bench.calvin_family", description=__doc__.split("\n")[0]
    )
    parser.add_argument("tasks", nargs="+", help="CALVIN subtasks, e.g. place_in_slider")
    parser.add_argument("--chains", type=int, default=40, help="look in the first N chains (default 40)")
    parser.add_argument("--max", type=int, default=3, help="attempts per subtask at most (default 3)")
    parser.add_argument("--out", type=Path, help="JSON lines file, one line per attempt")
    args = parser.parse_args(argv)
    chains = load_chains(0, args.chains)
    sink = args.out.open("w") if args.out else None
    try:
        with CalvinEnv() as env:
            for task in args.tasks:
                rows = family_attempts(env, task, chains, args.max, lambda row: _write(row, sink))
                counted = [r for r in rows if r["prefix_ok"]]
                wins = sum(r["success"] for r in counted)
                print(f"{task}: {wins}/{len(counted)} (chains {[r['chain'] for r in counted]})", flush=True)
    finally:
        if sink is not None:
            sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(_main())
