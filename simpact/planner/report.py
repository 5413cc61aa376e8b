"""The record of a planning run, readable by a person and re-executable.

``DIR/result.json`` (the contract of ``simpact plan``), ``DIR/proposals/NNN/{plan.json,rollout.json}`` (each
plan with its start pose, so any rollout can be re-executed exactly), ``DIR/prompts/`` (every prompt sent and
answer received, ``NNN_<role>.md`` plus ``exchanges.jsonl``), ``DIR/initial.png``, ``DIR/final.png`` and
``DIR/rollout.mp4`` of the accepted (or best) rollout, and ``DIR/report.md`` with a table of iterations.
Values of ``*_API_KEY``-like environment variables are blanked out of everything written.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from simpact.planner.context import initial_image, keyframes
from simpact.planner.records import PlanResult, Proposal
from solvers.world import World

__all__ = ["redact", "secret_values", "write_report"]

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
        path.write_text(redact(text, self.secrets), encoding="utf-8")
        return path

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
    lines = []
    for i, ex in enumerate(exchanges):
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
        lines.append(json.dumps({"file": Path(name).name, **ex}, default=str))
    w.text("prompts/exchanges.jsonl", "".join(line + "\n" for line in lines))


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
) -> Path:
    """Write the whole record of ``result`` under ``out``; returns ``out/result.json``. ``world`` (the
    World planned in) is needed for images and the video; without it they are left out."""
    w = _Writer(Path(out))
    w.out.mkdir(parents=True, exist_ok=True)
    payload = result.to_dict()
    for i, p in enumerate(result.proposals):
        _proposal_files(w, i, p)
    _prompts(w, result.exchanges)

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
    path = w.json("result.json", payload)

    verdict = "success" if result.success else "failure"
    chosen_idx = result.accepted if result.accepted is not None else result.best
    md = [
        f"# {result.task} (seed {result.seed}): {verdict}",
        "",
        *([f"> {instruction}", ""] if instruction else []),
        f"- planner: {result.method or '-'}; VLM: {result.vlm or 'none'}",
        f"- {len(result.proposals)} rollouts in {result.iterations} round(s), {result.wall_s:.1f} s wall",
        f"- accepted: {result.accepted if result.accepted is not None else 'none'}; "
        f"reported plan: {chosen_idx if chosen_idx is not None else 'none'}"
        + (f" (score {chosen.score:.3f}, task check {verdict})" if chosen is not None else ""),
        f"- SimuGuard audit: {json.dumps(result.audit) if result.audit is not None else 'not run'}",
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
    if result.failures:
        md += ["## Queries without a rollout", ""]
        md += [f"- {f.source} (round {f.iteration}): {f.reason}" for f in result.failures]
        md.append("")
    if result.exchanges:
        md += [f"Every prompt and answer ({len(result.exchanges)}) is under [prompts/](prompts/).", ""]
    w.text("report.md", "\n".join(md))
    return path
