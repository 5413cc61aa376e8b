"""The record of a planning run, readable by a person and re-executable.

``DIR/result.json`` (the contract of ``simpact plan``), ``DIR/proposals/NNN/{plan.json,rollout.json}`` (each
plan with its start pose, so any rollout can be re-executed exactly), ``DIR/prompts/`` (every prompt sent and
answer received, ``NNN_<role>.md`` plus ``exchanges.jsonl``), ``DIR/initial.png``, ``DIR/final.png`` and
``DIR/rollout.mp4`` of the accepted (or best) rollout, and ``DIR/report.md`` with a table of iterations.
Values of ``*_API_KEY``-like environment variables are blanked out of everything written.

:class:`RunWriter` writes as the run goes (each proposal and exchange when it is done, ``result.json``'s
counts through a :class:`~simpact.core.rundir.RunRecord`); :func:`write_report` writes the whole record at
the end, or of the partial run after an interruption or a failed service. Every write is atomic.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from simpact.core.jsonio import atomic_write_text
from simpact.core.rundir import RunRecord
from simpact.planner.context import initial_image, keyframes
from simpact.planner.records import PlanHooks, PlanResult, Proposal
from simpact.planner.resume import ANSWERS
from simpact.planner.tree import tree_markdown
from solvers.world import World

__all__ = ["RunWriter", "redact", "secret_values", "write_report"]

_SECRET_NAME = re.compile(r"(API_KEY|_TOKEN|_SECRET|PASSWORD)$", re.I)
_MIN_SECRET = 8


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of environment variables that look like credentials (``*_API_KEY``, ``*_TOKEN``...)."""
    env = dict(os.environ) if environ is None else environ
    return sorted({v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= _MIN_SECRET}, key=len)[
        ::-1
    ]


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


class _Writer:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.secrets = secret_values()

    def text(self, rel: str, text: str) -> Path:
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write_text(path, redact(text, self.secrets))

    def append(self, rel: str, line: str) -> None:
        """Append one line (flushed at once, so a killed run keeps it)."""
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(redact(line, self.secrets) + "\n")
            f.flush()

    def json(self, rel: str, payload: Any) -> Path:
        return self.text(rel, json.dumps(payload, indent=2, default=str) + "\n")

    def png(self, rel: str, image: np.ndarray) -> Path:
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.ascontiguousarray(image)).save(path, format="PNG")
        return path


def _slug(role: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", role).strip("_") or "query"


def _proposal_files(w: _Writer, i: int, p: Proposal) -> None:
    base = f"proposals/{i:03d}"
    w.json(f"{base}/plan.json", p.plan.to_dict())
    rollout = p.rollout.to_dict()
    rollout["evaluation"] = {
        "success": p.evaluation.success,
        "score": p.evaluation.score,
        "details": p.evaluation.details,
    }
    rollout["source"], rollout["iteration"], rollout["notes"] = p.source, p.iteration, p.notes
    w.json(f"{base}/rollout.json", rollout)


def _prompts(w: _Writer, exchanges: list[dict[str, Any]]) -> None:
    lines = [_exchange_file(w, i, ex) for i, ex in enumerate(exchanges)]
    w.text("prompts/exchanges.jsonl", "".join(line + "\n" for line in lines))


def _exchange_file(w: _Writer, i: int, ex: Mapping[str, Any]) -> str:
    """Write ``prompts/NNN_<role>.md`` of exchange ``i``; returns its ``exchanges.jsonl`` line."""
    name = f"prompts/{i:03d}_{_slug(str(ex.get('role', '')))}.md"
    answer = ex.get("answer")
    body = [
        f"# {ex.get('role')}",
        "",
        f"images sent: {ex.get('images', 0)}",
        "",
        "## Prompt",
        "",
        "````text",
        str(ex.get("prompt", "")),
        "````",
        "",
        "## Answer",
        "",
        "````text",
        "" if answer is None else str(answer),
        "````",
    ]
    if ex.get("error"):
        body += ["", "## Error", "", str(ex["error"])]
    w.text(name, "\n".join(body) + "\n")
    return json.dumps({"file": Path(name).name, **ex}, default=str)


def _check(p: Proposal) -> str:
    return "success" if p.success else "failure"


def _chosen_index(result: PlanResult) -> str:
    idx = result.accepted if result.accepted is not None else result.best
    return "none" if idx is None else str(idx)


def outcome_line(result: PlanResult) -> str:
    """The honest outcome: the accepted plan's (``success (score 0.950)``), else ``no plan accepted (best:
    score 0.810, task check success)``, or ``no plan accepted (no rollout)``."""
    if result.accepted is not None:
        p = result.proposals[result.accepted]
        return f"{'success' if result.success else 'failure'} (score {p.score:.3f})"
    if result.best is None:
        return "no plan accepted (no rollout)"
    best = result.proposals[result.best]
    return f"no plan accepted (best: score {best.score:.3f}, task check {_check(best)})"


def _remove_stale(out: Path, proposals: int, exchanges: int) -> None:
    """Remove ``proposals/NNN`` and ``prompts/NNN_*.md`` of an earlier run numbered past this one's."""
    for folder in (out / "proposals").glob("[0-9]*"):
        if folder.is_dir() and folder.name.isdigit() and int(folder.name) >= proposals:
            shutil.rmtree(folder)
    for f in (out / "prompts").glob("[0-9]*_*.md"):
        head = f.name.split("_", 1)[0]
        if head.isdigit() and int(head) >= exchanges:
            f.unlink()


class RunWriter:
    """Writes a planning run as it goes: ``proposals/NNN`` when a proposal is final, ``prompts/NNN_<role>.md``
    and a line of ``prompts/exchanges.jsonl`` when a VLM request is done, each asked request's record in
    ``prompts/answers.jsonl`` (for ``--resume``), and the counts in ``result.json`` through ``record``.
    Thread-safe (the VLM loop's sample queries run concurrently). ``on_proposal`` (optional) is called
    after each proposal is on disk."""

    def __init__(self, out: Path, record: RunRecord | None = None) -> None:
        self.w = _Writer(out)
        self.record = record
        self.proposals: dict[int, Proposal] = {}
        self.exchanges: dict[int, dict[str, Any]] = {}
        self._lock = threading.RLock()
        (out / "prompts").mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "prompts" / "exchanges.jsonl", "")  # this run's exchanges, from the first

    def proposal(self, index: int, p: Proposal) -> None:
        with self._lock:
            _proposal_files(self.w, index, p)
            self.proposals[index] = p
            self._counts()

    def exchange(self, index: int, entry: dict[str, Any]) -> None:
        with self._lock:
            self.w.append("prompts/exchanges.jsonl", _exchange_file(self.w, index, entry))
            self.exchanges[index] = entry
            self._counts()

    def answer(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self.w.append(ANSWERS, json.dumps(record, ensure_ascii=False, default=str))

    def hooks(self, reuse: Any = None) -> PlanHooks:
        """Hooks that write each proposal and exchange (``reuse``: a resumed run's stored proposals)."""
        return PlanHooks(on_proposal=self.proposal, on_exchange=self.exchange, reuse=reuse)

    def _counts(self) -> None:
        if self.record is not None:
            self.record.update(rollouts=len(self.proposals), exchanges=len(self.exchanges))


TREE_NOTE = (
    "Each node is the best sample of a primitive's CEM, rolled out from its parent's end snapshot; its score "
    "is the task's own goal on the whole history."
)


def _planner_lines(extra: Mapping[str, Any]) -> list[str]:
    """What the report says about a VLM-free planner: skeleton or not, the privileged score, repairs."""
    info = extra.get("planner")
    if not isinstance(info, Mapping):
        return []
    lines = [
        f"- planner {info['name']}: {'uses' if info.get('skeleton_used') else 'no'} skeleton; hint: "
        f"{info.get('hint', '-')}",
        f"- score: {info.get('score', '-')}",
    ]
    if "simulated_rollouts" in extra:
        lines.append(f"- rollouts simulated in the search: {extra['simulated_rollouts']}")
    if extra.get("repaired_successes"):
        lines.append(
            f"- successes only after a SimuGuard repair (not counted): {extra['repaired_successes']}"
        )
    return lines


def _table(result: PlanResult) -> list[str]:
    rows = [
        "| # | iteration | source | actions | score | task check | VLM verdict | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, p in enumerate(result.proposals):
        vlm = p.notes.get("vlm_success")
        verdict = "–" if vlm is None else ("success" if vlm else "failure")
        mark = " **accepted**" if i == result.accepted else (" best" if i == result.best else "")
        notes = []
        if p.notes.get("repairs"):
            notes.append("repaired")
        if p.notes.get("clamps"):
            notes.append(f"{len(p.notes['clamps'])} clamped")
        if p.notes.get("audit"):
            repair = p.notes.get("audit_repair")
            fixed = repair is not None and repair["artifact_free"]
            rerun = f", rerun with {repair['change']}: " if repair else ""
            if repair:
                rerun += "artifact-free" if fixed else "still flagged"
            notes.append(f"{len(p.notes['audit'])} SimuGuard artifacts{rerun}")
        rows.append(
            f"| [{i:03d}](proposals/{i:03d}/plan.json) | {p.iteration} | {p.source}{mark} | "
            f"{len(p.plan.actions)} | {p.score:.3f} | {'success' if p.success else 'failure'} | {verdict} | "
            f"{', '.join(notes)} |"
        )
    return rows


def write_report(
    result: PlanResult,
    out: str | Path,
    world: World | None = None,
    *,
    instruction: str = "",
    video: bool = True,
    images: bool = True,
    record: RunRecord | None = None,
    written: Collection[int] = (),
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write the whole record of ``result`` under ``out``; returns ``out/result.json``. ``world`` (the
    World planned in) is needed for images and the video; without it they are left out. With ``record``
    (the run's :class:`RunRecord`) ``result.json`` is its update (keeping ``status``); proposals whose
    indices are in ``written`` are on disk already; ``extra`` fields join ``result.json``. Files of an
    earlier run beyond this one's proposals and exchanges are removed."""
    w = _Writer(Path(out))
    w.out.mkdir(parents=True, exist_ok=True)
    payload = {**result.to_dict(), **(extra or {})}
    for i, p in enumerate(result.proposals):
        if i not in written:
            _proposal_files(w, i, p)
    _prompts(w, result.exchanges)
    _remove_stale(w.out, len(result.proposals), len(result.exchanges))

    files: dict[str, str | None] = {"initial_image": None, "final_image": None, "video": None}
    chosen = result.chosen
    if world is not None and images:
        files["initial_image"] = w.png("initial.png", initial_image(world)).name
        if chosen is not None:
            frames = keyframes(world, chosen.rollout)
            if frames:
                files["final_image"] = w.png("final.png", frames[-1]).name
    if world is not None and video and chosen is not None and chosen.rollout.trace is not None:
        files["video"] = world.write_video(chosen.rollout.trace, w.out / "rollout.mp4").name
    payload["files"] = {**files, "report": "report.md", "prompts": "prompts/", "proposals": "proposals/"}
    path = record.update(**payload) if record is not None else w.json("result.json", payload)

    status = f" ({record.payload['status']})" if record is not None else ""
    md = [
        f"# {result.task} (seed {result.seed}): {outcome_line(result)}{status}",
        "",
        *([f"> {instruction}", ""] if instruction else []),
        f"- planner: {result.method or '-'}; VLM: {result.vlm or 'none'}",
        f"- {len(result.proposals)} rollouts in {result.iterations} round(s), {result.wall_s:.1f} s wall",
        f"- accepted: {result.accepted if result.accepted is not None else 'none'}; "
        f"reported plan: {_chosen_index(result)}"
        + (f" (score {chosen.score:.3f}, task check {_check(chosen)})" if chosen is not None else ""),
        f"- SimuGuard audit: {json.dumps(result.audit) if result.audit is not None else 'not run'}",
        *_planner_lines(result.extra),
        "",
    ]
    if files["initial_image"] or files["final_image"]:
        md += ["| before | after (reported plan) |", "|---|---|"]
        before = f"![initial]({files['initial_image']})" if files["initial_image"] else ""
        after = f"![final]({files['final_image']})" if files["final_image"] else ""
        md += [f"| {before} | {after} |", ""]
    if files["video"]:
        md += [f"Video of the reported rollout: [{files['video']}]({files['video']})", ""]
    md += ["## Iterations", "", *_table(result), ""]
    if chosen is not None:
        md += ["## Reported plan", ""]
        md += [f"{k}. `{a}`" for k, a in enumerate(chosen.plan.actions, 1)]
        md.append("")
    if result.extra.get("tree"):
        md += ["## Explored tree", "", TREE_NOTE, "", *tree_markdown(result.extra["tree"]), ""]
    if result.failures:
        md += ["## Queries without a rollout", ""]
        md += [f"- {f.source} (round {f.iteration}): {f.reason}" for f in result.failures]
        md.append("")
    if result.exchanges:
        md += [f"Every prompt and answer ({len(result.exchanges)}) is under [prompts/](prompts/).", ""]
    w.text("report.md", "\n".join(md))
    return path
