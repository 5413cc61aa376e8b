"""Checks of the rebuilt environment against the data: resets reproduce ``scene_obs``; each subtask's check
fires on a scripted motion that achieves it and not on a near miss.

Each subtask is tried from a real evaluation chain: the first chain (official order) in which it comes
earliest; the subtasks before it in that chain are scripted first (e.g. ``lift_red_block_table`` before
``place_in_drawer``). As in the evaluation, the check is evaluated after every control step against the
state at the subtask's start, and the first success counts.

Run all 34 with ``python -m simpact.calvin.selfcheck [--out FILE]``; ``--compare-official N`` replays N chains
on the official ``calvin_env`` too (when it is importable) and reports the differences.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from simpact.calvin.checks import Snapshot, achieved, check
from simpact.calvin.data import EP_LEN, SUBTASKS, Chain, load_chains
from simpact.calvin.env import BACKEND, CalvinEnv
from simpact.calvin.official import OfficialEnv, official_available
from simpact.calvin.scripted import Mover, script_for
from simpact.core.errors import SimpactError

__all__ = [
    "ResetError",
    "TaskResult",
    "chain_for",
    "compare_backends",
    "reset_errors",
    "run_subtask",
    "try_task",
]


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


def _by_name(snap: Snapshot) -> tuple[object, ...]:
    """A snapshot with body ids replaced by names (ids depend on load order and on other clients)."""
    names = {snap.robot_uid: "robot", snap.table_uid: "table"} | {b.uid: c for c, b in snap.blocks.items()}

    def contacts(found: frozenset[tuple[int, int]]) -> frozenset[tuple[str, int]]:
        return frozenset((names.get(body, "other"), link) for body, link in found)

    blocks = {c: (b.pos, b.quat, b.lin_vel, b.ang_vel, contacts(b.contacts)) for c, b in snap.blocks.items()}
    return (snap.table_links, snap.doors, snap.lights, blocks, contacts(snap.robot_contacts))


def compare_backends(chains: list[Chain], steps: int = 60, seed: int = 0) -> list[dict[str, object]]:
    """Official ``calvin_env`` against the rebuild, fresh environments per chain: after the reset and after
    ``steps`` seeded random relative actions, the largest |difference| of ``robot_obs`` (gripper action
    excluded: calvin_env keeps the previous one on reset) and ``scene_obs``, and whether every contact
    set, light and joint the checks read is the same."""
    out: list[dict[str, object]] = []
    for chain in chains:
        actions = np.random.default_rng(seed + chain.index).uniform(-1.0, 1.0, (steps, 7))
        with OfficialEnv() as official, CalvinEnv() as rebuild:
            row: dict[str, object] = {"kind": "compare", "chain": chain.index, "steps": steps}
            for phase in ("reset", "steps"):
                if phase == "reset":
                    for env in (official, rebuild):
                        env.reset(chain.robot_obs, chain.scene_obs)
                else:
                    for action in actions:
                        official.step(action, relative=True)
                        rebuild.step(action, relative=True)
                robot = np.abs(official.robot_obs() - rebuild.robot_obs())[:14].max()
                scene = np.abs(official.scene_obs() - rebuild.scene_obs()).max()
                row[f"{phase}_robot_obs"], row[f"{phase}_scene_obs"] = float(robot), float(scene)
                same = _by_name(official.snapshot()) == _by_name(rebuild.snapshot())
                row[f"{phase}_snapshot_equal"] = same
            out.append(row)
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
    parser.add_argument(
        "--compare-official", type=int, default=0, help="chains to replay on calvin_env too (needs it)"
    )
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
            if args.compare_official:
                if not official_available():
                    raise SimpactError(
                        "--compare-official needs calvin_env importable (install it from its repository)"
                    )
                for row in compare_backends(chains[: args.compare_official]):
                    emit(row)
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
