"""Checks of the rebuilt environment against the data: resets reproduce ``scene_obs``; each subtask's check
fires on a scripted motion that achieves it and not on a near miss.

Each subtask is tried from a real evaluation chain: the first chain (official order) in which it comes
earliest; the subtasks before it in that chain are scripted first (e.g. ``lift_red_block_table`` before
``place_in_drawer``). As in the evaluation, the check is evaluated after every control step against the
state at the subtask's start, and the first success counts.

Run all 34 with ``python -m simpact.calvin.selfcheck [--out FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from simpact.calvin.checks import achieved, check
from simpact.calvin.data import EP_LEN, SUBTASKS, Chain, load_chains
from simpact.calvin.env import BACKEND, CalvinEnv
from simpact.calvin.scripted import Mover, script_for
from simpact.core.errors import SimpactError

__all__ = ["ResetError", "TaskResult", "chain_for", "reset_errors", "run_subtask", "try_task"]


@dataclass(frozen=True)
class ResetError:
    """Largest |simulated − chain| ``scene_obs`` error after a reset, per kind of value."""

    chain: int
    joints_m: float
    lights: float
    block_pos_m: float
    block_euler_rad: float


def _euler_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs((a - b + np.pi) % (2 * np.pi) - np.pi)))


def reset_errors(env: CalvinEnv, chains: list[Chain]) -> list[ResetError]:
    """Reset to each chain (robot, scene, one physics step as calvin_env) and compare ``scene_obs``."""
    out = []
    for chain in chains:
        env.reset(chain.robot_obs, chain.scene_obs)
        got, want = env.scene_obs(), chain.scene_obs
        blocks_got, blocks_want = got[6:].reshape(3, 6), want[6:].reshape(3, 6)
        out.append(
            ResetError(
                chain=chain.index,
                joints_m=float(np.max(np.abs(got[:4] - want[:4]))),
                lights=float(np.max(np.abs(got[4:6] - want[4:6]))),
                block_pos_m=float(np.max(np.abs(blocks_got[:, :3] - blocks_want[:, :3]))),
                block_euler_rad=_euler_error(blocks_got[:, 3:], blocks_want[:, 3:]),
            )
        )
    return out


@dataclass
class TaskResult:
    """One scripted attempt: did ``task``'s check fire (at which step), and what else fired."""

    task: str
    achieve: bool
    chain: int
    prefix: list[str]
    prefix_ok: bool
    fired: bool
    first_step: int | None
    steps: int
    others: list[str] = field(default_factory=list)
    backend: str = BACKEND


def chain_for(task: str, chains: list[Chain]) -> tuple[Chain, list[str]]:
    """The chain in which ``task`` comes earliest (first such chain in order) and the subtasks before it."""
    for k in range(5):
        for chain in chains:
            if chain.sequence[k] == task:
                return chain, list(chain.sequence[:k])
    raise SimpactError(f"no evaluation chain contains {task!r}")


def run_subtask(env: CalvinEnv, task: str, achieve: bool = True) -> tuple[bool, int | None, int, set[str]]:
    """Script ``task`` from the current state; (fired, first step it fired, steps used, others that fired)."""
    start = env.snapshot()
    mover = Mover(env)
    first: list[int] = []
    others: set[str] = set()

    def watch() -> None:
        now = env.snapshot()
        if not first and check(task, start, now):
            first.append(mover.steps)
        others.update(achieved(start, now) - {task})

    mover.on_step = watch
    script_for(task)(mover, task, achieve)
    return bool(first), (first[0] if first else None), mover.steps, others


def try_task(env: CalvinEnv, task: str, achieve: bool, chains: list[Chain]) -> TaskResult:
    """Reset to ``task``'s chain, script the subtasks before it, then script ``task`` (or its near miss)."""
    chain, prefix = chain_for(task, chains)
    env.reset(chain.robot_obs, chain.scene_obs)
    prefix_ok = True
    for before in prefix:
        prefix_ok = run_subtask(env, before, True)[0] and prefix_ok
    fired, first, steps, others = run_subtask(env, task, achieve)
    return TaskResult(task, achieve, chain.index, prefix, prefix_ok, fired, first, steps, sorted(others))


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simpact.calvin.selfcheck", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--tasks", nargs="*", default=list(SUBTASKS), help="subtasks (default: all 34)")
    parser.add_argument("--resets", type=int, default=20, help="chains whose reset is compared (default 20)")
    parser.add_argument("--out", type=Path, help="JSON lines file, one line per result as it finishes")
    args = parser.parse_args(argv)
    chains = load_chains()
    sink = args.out.open("w") if args.out else None

    def emit(record: dict[str, object]) -> None:
        line = json.dumps(record)
        print(line, flush=True)
        if sink is not None:
            sink.write(line + "\n")
            sink.flush()

    good = 0
    try:
        with CalvinEnv() as env:
            for err in reset_errors(env, chains[: args.resets]):
                emit({"kind": "reset", "backend": BACKEND, **asdict(err)})
            for task in args.tasks:
                t0 = time.perf_counter()
                pos = try_task(env, task, True, chains)
                neg = try_task(env, task, False, chains)
                ok = pos.fired and not neg.fired and pos.steps <= EP_LEN
                good += ok
                emit(
                    {
                        "kind": "task",
                        "task": task,
                        "ok": ok,
                        "positive": asdict(pos),
                        "negative": asdict(neg),
                        "wall_s": round(time.perf_counter() - t0, 2),
                    }
                )
    except KeyboardInterrupt:
        print("interrupted; results so far are above", file=sys.stderr)
        return 130
    finally:
        if sink is not None:
            sink.close()
    print(f"{good}/{len(args.tasks)} subtasks: check fires on the scripted motion and not on its near miss")
    return 0 if good == len(args.tasks) else 1


if __name__ == "__main__":
    sys.exit(_main())
