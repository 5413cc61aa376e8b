"""``simpact bench calvin``: CALVIN's long-horizon evaluation over chains, resumable, beside published ones.

One line per finished chain in ``DIR/runs.jsonl`` (the shared episode log, keyed ``("calvin", chain)``),
so a killed run resumes without losing or repeating a chain. Chains run one after another in this process,
or, with ``executor="ray"``, as Ray tasks on a cluster (each worker builds its own environment) while this
process appends their records to the same log. The summary has SR1..SR5, the average length, the
back-end, the mode and the wall time per chain. Every chain is audited by SimuGuard (the PyBullet recorder
of :mod:`simpact.calvin.audit`, the planner's own detector): each record carries its artifact count and the
summary the success range when every flagged subtask fails or succeeds. Mode ``scripted`` runs the
privileged scripted motions (rebuild back-end): it checks the environment and the protocol end to end; it
is not a policy to rank.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from simpact.bench.calvin_simpact import simpact_offline_policy
from simpact.bench.calvin_vlm import vlm_policy
from simpact.bench.episodes import BenchError, EpisodeLog, duration, settings_id
from simpact.bench.ray_executor import ray_map
from simpact.bench.tasks import VLM_RESULT_FREE
from simpact.calvin.data import EP_LEN, Chain, load_chains
from simpact.calvin.evaluate import (
    PUBLISHED,
    Policy,
    evaluate_chain,
    scripted_policy,
    success_range,
    summarise,
)
from simpact.calvin.official import make_env
from simpact.core.errors import SimpactError
from simpact.core.vocab import EXECUTORS
from solvers.mujoco.render import VideoWriter

__all__ = ["MODES", "VLM_MODE", "CalvinProgress", "format_table", "mode_policy", "run_calvin"]

#: Modes of ``bench calvin`` with a fixed policy; mode ``simpact`` (the paper's) takes a VLM's settings.
MODES: dict[str, Policy] = {"scripted": scripted_policy, "simpact-offline": simpact_offline_policy}
VLM_MODE = "simpact"


def mode_policy(mode: str, vlm: Mapping[str, Any] | None = None) -> Policy:
    """The policy of ``mode``; ``vlm``: the VLM settings of mode ``simpact`` (and only of it)."""
    if mode == VLM_MODE:
        return vlm_policy(vlm or {})
    if mode not in MODES:
        raise SimpactError(f"unknown CALVIN mode {mode!r}; choose from {', '.join([*MODES, VLM_MODE])}")
    if vlm:
        raise SimpactError(f"a VLM goes with --mode {VLM_MODE}, not --mode {mode}")
    return MODES[mode]


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

        record = evaluate_chain(env, chain, act, on_step=film, audit=True)
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
        flagged = f", {record['artifacts']} artifact(s)" if record.get("artifacts") else ""
        self._line(
            f"  chain {record['chain']}: {record['completed']}/5 ({tasks}) {record['wall_s']:.1f} s{flagged}"
        )

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


@dataclass(frozen=True)
class _ChainJob:
    """One chain to evaluate, as a Ray task receives it: the policy by its mode's name (a module-level
    function, looked up in the worker), the resolved back-end, the video file or None."""

    chain: Chain
    mode: str
    backend: str
    video: Path | None = None
    vlm: Mapping[str, Any] | None = None
    """Mode ``simpact``'s VLM settings (the worker builds its own VLM from them)."""


def _chain_record(env: Any, job: _ChainJob, act: Policy) -> dict[str, Any]:
    """The chain's episode-log record, evaluated (and filmed) in ``env``."""
    video = job.video
    done = _filmed(env, job.chain, act, video) if video else evaluate_chain(env, job.chain, act, audit=True)
    return {"task": _KEY, "seed": job.chain.index, "mode": job.mode, **done}


def _chain_task(job: _ChainJob) -> dict[str, Any]:
    """A Ray task: build this worker's own environment, evaluate the chain, close it. An exception becomes
    an ``error`` record (not logged: retried on resume), so that one broken chain does not stop the rest."""
    try:
        env = make_env(job.backend)
        try:
            return _chain_record(env, job, mode_policy(job.mode, job.vlm))
        finally:
            env.close()
    except Exception as exc:  # noqa: BLE001 - reported by the driver in one line
        return {"task": _KEY, "seed": job.chain.index, "error": f"{type(exc).__name__}: {exc}"}


def _video_path(out: Path, chain: Chain) -> Path:
    return out / "videos" / f"chain_{chain.index:04d}.mp4"


def _reporter(
    progress: CalvinProgress | None, so_far: Callable[[], object] | None = None
) -> Callable[[dict[str, Any]], None]:
    """The log's ``on_record`` hook: a finished chain to the progress display and ``so_far()`` (errors are
    reported once, at the end)."""

    def report(record: dict[str, Any]) -> None:
        if "error" in record:
            return
        if progress is not None:
            progress.record(record)
        if so_far is not None:
            so_far()

    return report


def run_calvin(
    out: Path,
    start: int,
    count: int,
    mode: str = "scripted",
    backend: str = "rebuild",
    progress: CalvinProgress | None = None,
    policy: Policy | None = None,
    video: bool = False,
    *,
    executor: str = "local",
    workers: int = 1,
    vlm: Mapping[str, Any] | None = None,
    on_summary: Callable[[dict[str, Any]], object] | None = None,
) -> dict[str, Any]:
    """Evaluate chains ``start .. start+count-1``; finished chains are logged and skipped on a rerun.
    With ``video``, each chain's static-camera film goes to ``out/videos/chain_NNNN.mp4``.
    ``on_summary`` gets the summary of the chains finished so far after each one (an interrupted run's).

    ``executor="ray"`` runs each chain as a Ray task (on a running cluster, else on a local Ray instance
    with ``workers`` CPUs) whose worker builds its own environment; this process appends each record to the
    same log as it arrives. Its policy is the mode's (``policy`` is refused); videos are written by the
    workers, so on several machines ``out`` must be a folder they share."""
    act = policy or mode_policy(mode, vlm)  # an unknown mode or a missing VLM fails before any chain
    if executor not in EXECUTORS:
        raise BenchError(f"unknown executor '{executor}'; expected one of {', '.join(EXECUTORS)}")
    if executor == "ray" and policy is not None:
        raise BenchError("a policy object runs with executor local only; with ray the mode names the policy")
    chains = load_chains(start, count)
    out = Path(out).resolve() if executor == "ray" else Path(out)  # workers may run elsewhere
    env = make_env(backend)
    try:
        if mode == "scripted" and env.backend != "rebuild":
            raise SimpactError(
                "--mode scripted drives the rebuild's simulator directly: use --backend rebuild"
            )
        key = {"bench": "calvin", "mode": mode, "backend": env.backend, "ep_len": EP_LEN, "audit": True}
        if vlm:
            key["vlm"] = {k: v for k, v in vlm.items() if k not in VLM_RESULT_FREE}
        log = EpisodeLog(out, {_KEY: settings_id(key)})
        wanted = [(_KEY, c.index) for c in chains]
        todo = set(log.todo(wanted))
        if progress is not None:
            progress.start(len(wanted), log.records(wanted))
        jobs = [
            _ChainJob(
                c, mode, env.backend, out / "videos" / f"chain_{c.index:04d}.mp4" if video else None, vlm
            )
            for c in chains
            if (_KEY, c.index) in todo
        ]
        if executor == "ray":
            finished = ray_map(_chain_task, jobs, workers)
        else:
            finished = (_chain_record(env, job, act) for job in jobs)

        def summary() -> dict[str, Any]:
            records = log.records(wanted)
            return {
                **summarise(records),
                "backend": env.backend,
                "mode": mode,
                "executor": executor,
                "first_chain": start,
                "wall_s_per_chain": {str(r["chain"]): r["wall_s"] for r in records},
                "artifacts_per_chain": {str(r["chain"]): r.get("artifacts") for r in records},
                "audit": success_range(records),
                "ignored": log.ignored,
            }

        so_far = None if on_summary is None else (lambda: on_summary(summary()))
        errors = log.append(finished, _reporter(progress, so_far))
    finally:
        env.close()
        if progress is not None:
            progress.close()
    if errors:
        failed = "; ".join(f"chain {e['seed']}: {e['error']}" for e in errors[:3])
        more = f"; {len(errors) - 3} more" if len(errors) > 3 else ""
        raise BenchError(f"{len(errors)} chain(s) failed ({failed}{more}); rerun with this --out to retry")
    return summary()


def format_table(result: Mapping[str, Any]) -> str:
    """This run's SR1..SR5 and average length beside the published results (in %, 1000 chains unless said)."""
    rows = [
        "| method | training | SR1 | SR2 | SR3 | SR4 | SR5 | avg len |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ours = " | ".join(f"{100 * v:.1f}" for v in result["sr"])
    name = f"this run: {result['mode']} ({result['backend']}, {result['chains']} chains)"
    rows.append(f"| {name} | none | {ours} | {result['avg_len']:.2f} |")
    audit = result.get("audit")
    if audit and audit.get("flagged_chains"):
        for bound in ("lower", "upper"):
            cells = " | ".join(f"{100 * v:.1f}" for v in audit[bound]["sr"])
            label = "every flagged subtask failed" if bound == "lower" else "every flagged failure succeeded"
            rows.append(f"| this run if {label} | none | {cells} | {audit[bound]['avg_len']:.2f} |")
    for method, (split, sr, avg) in PUBLISHED.items():
        cells = " | ".join(f"{v:.1f}" for v in sr) if sr else " | ".join("" for _ in range(5))
        rows.append(f"| {method} | {split} | {cells} | {avg:.2f} |")
    return "\n".join(rows)
