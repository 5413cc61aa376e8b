"""``simpact bench calvin``: CALVIN's long-horizon evaluation over chains, resumable, beside published ones.

One line per finished chain in ``DIR/runs.jsonl`` (the shared episode log, keyed ``("calvin", chain)``),
so a killed run resumes without losing or repeating a chain. The summary has SR1..SR5, the average length,
the back-end, the mode and the wall time per chain. Mode ``scripted`` runs the privileged scripted motions
(rebuild back-end): it checks the environment and the protocol end to end; it is not a policy to rank.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from simpact.bench.episodes import EpisodeLog, duration, settings_id
from simpact.calvin.data import EP_LEN, Chain, load_chains
from simpact.calvin.evaluate import PUBLISHED, Policy, evaluate_chain, scripted_policy, summarise
from simpact.calvin.official import make_env
from simpact.core.errors import SimpactError
from solvers.mujoco.render import VideoWriter

__all__ = ["MODES", "CalvinProgress", "format_table", "run_calvin"]

#: Modes of ``bench calvin`` and their policies.
MODES: dict[str, Policy] = {"scripted": scripted_policy}
_KEY = "calvin"
#: Videos film every second control step: 15 frames per second of simulated time.
_VIDEO_EVERY = 2


def _filmed(env: Any, chain: Chain, act: Policy, path: Path) -> dict[str, Any]:
    """``evaluate_chain`` with the static camera filmed to ``path`` (mp4, 15 fps)."""
    steps = [0]
    with VideoWriter(path, fps=30.0 / _VIDEO_EVERY) as video:

        def film() -> None:
            steps[0] += 1
            if steps[0] % _VIDEO_EVERY == 0:
                video.append(env.render("static").rgb)

        record = evaluate_chain(env, chain, act, on_step=film)
    return {**record, "video": str(path)}


class CalvinProgress:
    """Chains done/total, the running average length, elapsed time and ETA: a ``\\r`` bar on a terminal,
    a plain line per chain otherwise."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.total = self.resumed = 0
        self.lengths: list[int] = []
        self.t0 = time.perf_counter()

    def start(self, total: int, done: Sequence[Mapping[str, Any]]) -> None:
        self.total, self.resumed = total, len(done)
        self.lengths = [int(r["completed"]) for r in done]
        self.t0 = time.perf_counter()
        if done:
            self._line(f"resuming: {len(done)} of {total} chains already in runs.jsonl")

    def record(self, record: Mapping[str, Any]) -> None:
        self.lengths.append(int(record["completed"]))
        tasks = " ".join(("+" if s["success"] else "-") + s["task"] for s in record["subtasks"])
        self._line(f"  chain {record['chain']}: {record['completed']}/5 ({tasks}) {record['wall_s']:.1f} s")

    def status(self) -> str:
        done = len(self.lengths)
        ran = done - self.resumed
        elapsed = time.perf_counter() - self.t0
        eta = duration(elapsed / ran * (self.total - done)) if ran else "?"
        avg = sum(self.lengths) / done if done else 0.0
        return f"[{done}/{self.total}] avg len {avg:.2f}, elapsed {duration(elapsed)}, ETA {eta}"

    def _line(self, text: str) -> None:
        prefix = "\r\033[K" if self.tty else ""
        self.stream.write(f"{prefix}{text}  {self.status()}\n")
        self.stream.flush()

    def close(self) -> None:
        self.stream.flush()


def run_calvin(
    out: Path,
    start: int,
    count: int,
    mode: str = "scripted",
    backend: str = "rebuild",
    progress: CalvinProgress | None = None,
    policy: Policy | None = None,
    video: bool = False,
) -> dict[str, Any]:
    """Evaluate chains ``start .. start+count-1``; finished chains are logged and skipped on a rerun.
    With ``video``, each chain's static-camera film goes to ``out/videos/chain_NNNN.mp4``."""
    if mode not in MODES:
        raise SimpactError(f"unknown CALVIN mode {mode!r}; choose from {', '.join(MODES)}")
    chains = load_chains(start, count)
    env = make_env(backend)
    try:
        if mode == "scripted" and env.backend != "rebuild":
            raise SimpactError(
                "--mode scripted drives the rebuild's simulator directly: use --backend rebuild"
            )
        log = EpisodeLog(out, {_KEY: settings_id({"bench": "calvin", "mode": mode, "backend": env.backend,
                                                 "ep_len": EP_LEN})})  # fmt: skip
        wanted = [(_KEY, c.index) for c in chains]
        todo = set(log.todo(wanted))
        if progress is not None:
            progress.start(len(wanted), log.records(wanted))
        act = policy or MODES[mode]
        on_record: Callable[[dict[str, Any]], None] | None = progress.record if progress else None
        for chain in chains:
            if (_KEY, chain.index) in todo:
                path = out / "videos" / f"chain_{chain.index:04d}.mp4"
                done = _filmed(env, chain, act, path) if video else evaluate_chain(env, chain, act)
                log.append([{"task": _KEY, "seed": chain.index, "mode": mode, **done}], on_record)
    finally:
        env.close()
        if progress is not None:
            progress.close()
    records = log.records(wanted)
    return {
        **summarise(records),
        "backend": env.backend,
        "mode": mode,
        "first_chain": start,
        "wall_s_per_chain": {str(r["chain"]): r["wall_s"] for r in records},
        "ignored": log.ignored,
    }


def format_table(result: Mapping[str, Any]) -> str:
    """This run's SR1..SR5 and average length beside the published results (in %, 1000 chains unless said)."""
    rows = [
        "| method | training | SR1 | SR2 | SR3 | SR4 | SR5 | avg len |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ours = " | ".join(f"{100 * v:.1f}" for v in result["sr"])
    name = f"this run: {result['mode']} ({result['backend']}, {result['chains']} chains)"
    rows.append(f"| {name} | none | {ours} | {result['avg_len']:.2f} |")
    for method, (split, sr, avg) in PUBLISHED.items():
        cells = " | ".join(f"{v:.1f}" for v in sr) if sr else " | ".join("" for _ in range(5))
        rows.append(f"| {method} | {split} | {cells} | {avg:.2f} |")
    return "\n".join(rows)
