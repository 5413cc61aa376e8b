"""Which objects to look for: labels from ``--labels``, a task config, or a VLM given the instruction
(SIMPACT §3.1), and the VLM side of labelling geometric clusters.

Precedence: labels the user gives, then the task's object names, then the VLM's answer to
``prompts/object_labels.md``; with none of these the segmenter finds objects geometrically and names them
``object_0``, ``object_1``, ... . Every result says where its labels came from.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from simpact.core.errors import SimpactError
from simpact.vlm import VLM
from simpact.vlm.answers import object_labels_schema
from simpact.vlm.ask import ask, check_json, echo_quoted
from simpact.vlm.prompts import render_prompt

__all__ = [
    "LabelError",
    "Labels",
    "object_name",
    "parse_labels",
    "resolve_labels",
    "task_labels",
    "vlm_assigner",
    "vlm_labels",
]

LABEL_SOURCES = ("user", "task", "vlm", "none")
MAX_LABELS = 32
"""More objects than this is almost certainly a malformed list."""


class LabelError(SimpactError, ValueError):
    """Unusable labels (empty, duplicated, unreadable VLM answer); the message says which and why."""


@dataclasses.dataclass
class Labels:
    """The detector phrases to look for, where they came from, and each one's role when known."""

    labels: list[str]
    """Detector-ready noun phrases, e.g. ``"green bowl"``; empty: find objects geometrically."""
    source: str
    """``user``, ``task``, ``vlm`` or ``none``."""
    roles: dict[str, str] = dataclasses.field(default_factory=dict)
    """Label → manipulated, target, obstacle or other (VLM answers only)."""
    names: dict[str, str] = dataclasses.field(default_factory=dict)
    """Label → scene object name (a task's own names; otherwise :func:`object_name` of the label)."""
    exchange: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """The VLM requests' prompt and answer texts."""
    warnings: list[str] = dataclasses.field(default_factory=list)

    def name_of(self, label: str) -> str:
        return self.names.get(label) or object_name(label)

    def to_dict(self) -> dict[str, Any]:
        return {
            "labels": list(self.labels),
            "source": self.source,
            "roles": dict(self.roles),
            "names": {label: self.name_of(label) for label in self.labels},
            "warnings": list(self.warnings),
        }


def object_name(label: str) -> str:
    """A scene object name from a label: lower case, words joined by ``_`` ("Green bowl" → ``green_bowl``)."""
    words = [w for w in re.split(r"[^a-z0-9]+", label.lower()) if w]
    if not words:
        raise LabelError(f"label {label!r} has no letters or digits to name an object by")
    return "_".join(words)


def _clean(labels: Sequence[str], where: str) -> list[str]:
    out: list[str] = []
    seen: dict[str, str] = {}
    for raw in labels:
        if not isinstance(raw, str):
            raise LabelError(f"{where}: a label must be text, got {raw!r}")
        label = " ".join(raw.split())
        if not label:
            raise LabelError(f"{where}: empty label in {list(labels)!r}")
        name = object_name(label)
        if name in seen:
            raise LabelError(f"{where}: labels {seen[name]!r} and {label!r} name the same object '{name}'")
        seen[name] = label
        out.append(label)
    if len(out) > MAX_LABELS:
        raise LabelError(f"{where}: {len(out)} labels; at most {MAX_LABELS}")
    return out


def parse_labels(text: str) -> list[str]:
    """``"green bowl, white bowl"`` → ``["green bowl", "white bowl"]``; commas or semicolons separate."""
    parts = [p for p in re.split(r"[,;]", text)]
    if not text.strip() or not any(p.strip() for p in parts):
        raise LabelError(
            f'--labels {text!r}: give comma-separated object names, e.g. "green bowl, white bowl"'
        )
    if any(not p.strip() for p in parts):
        raise LabelError(f"--labels {text!r}: an empty label between commas")
    return _clean(parts, "--labels")


def task_labels(task: Any) -> Labels:
    """The objects of a task config that can be seen and touched (markers without collision left out):
    label ``"green bowl"`` for object ``green_bowl``."""
    names = [o.name for o in task.nominal_scene.objects if o.collides]
    if not names:
        raise LabelError(f"task {task.name}: no object to look for (all are markers)")
    labels = [n.replace("_", " ") for n in names]
    return Labels(_clean(labels, f"task {task.name}"), "task", names=dict(zip(labels, names)))


def vlm_labels(vlm: VLM, rgb: np.ndarray, instruction: str) -> Labels:
    """Ask ``vlm`` which objects the instruction involves (``prompts/object_labels.md``), with one repair
    round for an unusable answer; raises :class:`LabelError` when the second answer is unusable too."""
    if not instruction or not instruction.strip():
        raise LabelError("asking a VLM for object labels needs an instruction (--instruction)")
    text = render_prompt("object_labels", task=instruction.strip())
    asked = ask(
        vlm,
        [text, np.ascontiguousarray(rgb)],
        object_labels_schema(),
        lambda answer: check_json(answer, _read_labels),
        role="object_labels",
        echo=echo_quoted,
        catch=(),
    )
    checked = asked.result
    if checked is None or checked.value is None:
        problems = asked.verdicts[-1].errors
        raise LabelError(f"the VLM's object labels are unusable after a repair round: {'; '.join(problems)}")
    result = checked.value
    result.exchange = [e.summary() for e in asked.exchanges]
    return result


def _read_labels(data: Any) -> tuple[Labels | None, list[str]]:
    items = data.get("objects") if isinstance(data, Mapping) else None
    if not isinstance(items, list) or not items:
        return None, ['the answer must be {"objects": [{"label": ..., "role": ...}, ...]} with at least one']
    labels, roles, problems = [], {}, []
    for i, item in enumerate(items):
        label = item.get("label") if isinstance(item, Mapping) else None
        if not isinstance(label, str) or not label.strip():
            problems.append(f"objects[{i}] needs a non-empty 'label'")
            continue
        label = " ".join(label.split())
        if label in roles:
            continue  # the same object twice: keep the first
        labels.append(label)
        role = item.get("role")
        roles[label] = role if role in ("manipulated", "target", "obstacle", "other") else "other"
    if problems:
        return None, problems
    try:
        labels = _clean(labels, "VLM object labels")
    except LabelError as exc:
        return None, [str(exc)]
    return Labels(labels, "vlm", roles=roles), []


def resolve_labels(
    labels: Sequence[str] | str | None = None,
    *,
    task: Any = None,
    instruction: str | None = None,
    vlm: Any = None,
    rgb: np.ndarray | None = None,
) -> Labels:
    """The labels to look for: ``labels`` (a list or ``"a, b"``), else the task's objects, else the VLM's
    answer for ``instruction`` on ``rgb``, else none (geometric segmentation names what it finds)."""
    if labels is not None:
        parsed = parse_labels(labels) if isinstance(labels, str) else _clean(list(labels), "labels")
        if not parsed:
            raise LabelError("labels: the list is empty")
        out = Labels(parsed, "user")
        if task is not None:
            # A user label that is a task object's name keeps that name.
            known = {object_name(o.name): o.name for o in task.nominal_scene.objects}
            out.names = {lab: known[object_name(lab)] for lab in parsed if object_name(lab) in known}
        return out
    if task is not None:
        return task_labels(task)
    if vlm is not None:
        if not instruction:
            return Labels(
                [], "none", warnings=["a VLM is set but no instruction: objects found geometrically"]
            )
        if rgb is None:
            raise LabelError("asking a VLM for labels needs the frame's image")
        return vlm_labels(vlm, rgb, instruction)
    warnings = []
    if instruction:
        warnings.append(
            "no VLM to read the instruction for object labels (use --vlm or --labels): "
            "objects found geometrically and named object_0, object_1, ..."
        )
    return Labels([], "none", warnings=warnings)


# --- the VLM side of labelling geometric clusters -----------------------------------------------------


def _cluster_summary(cluster: Any, index: int) -> dict[str, Any]:
    """A JSON-able description of one cluster for the prompt: whatever the segmenter put in it."""
    if isinstance(cluster, Mapping):
        raw = dict(cluster)
    elif dataclasses.is_dataclass(cluster) and not isinstance(cluster, type):
        raw = {f.name: getattr(cluster, f.name) for f in dataclasses.fields(cluster)}
    else:
        raw = {"description": str(cluster)}
    out: dict[str, Any] = {"index": index}
    for key, value in raw.items():
        if isinstance(value, np.ndarray):
            if value.size <= 8:
                out[key] = np.round(value.astype(float), 3).tolist()
            continue  # masks and point arrays stay out of the text
        if isinstance(value, (str, int, float, bool)) or value is None:
            out[key] = round(value, 3) if isinstance(value, float) else value
        elif isinstance(value, (list, tuple)) and len(value) <= 8:
            out[key] = [round(v, 3) if isinstance(v, float) else v for v in value]
    return out


def _mask_of(cluster: Any) -> np.ndarray | None:
    mask = cluster.get("mask") if isinstance(cluster, Mapping) else getattr(cluster, "mask", None)
    return mask if isinstance(mask, np.ndarray) and mask.dtype == np.bool_ else None


def _marked_image(rgb: np.ndarray, clusters: Sequence[Any]) -> np.ndarray:
    """The image with each cluster outlined and numbered at its centroid, so the VLM can refer to it."""
    import cv2

    img = np.ascontiguousarray(rgb.copy())
    for i, cluster in enumerate(clusters):
        mask = _mask_of(cluster)
        if mask is None or not mask.any():
            continue
        contours, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        cv2.drawContours(img, contours, -1, (255, 255, 0), 2)
        ys, xs = np.nonzero(mask)
        at = (int(xs.mean()) - 6, int(ys.mean()) + 6)
        cv2.putText(img, str(i), at, cv2.FONT_HERSHEY_SIMPLEX, 0.8, (0, 0, 0), 4, cv2.LINE_AA)
        cv2.putText(img, str(i), at, cv2.FONT_HERSHEY_SIMPLEX, 0.8, (255, 255, 255), 2, cv2.LINE_AA)
    return img


def assign_schema() -> dict[str, Any]:
    """JSON schema of a cluster-assignment answer."""
    return {
        "type": "object",
        "properties": {
            "assignments": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "label": {"type": "string"},
                        "cluster": {"type": "integer", "minimum": -1},
                        "reason": {"type": "string"},
                    },
                    "required": ["label", "cluster"],
                },
            }
        },
        "required": ["assignments"],
    }


def vlm_assigner(
    vlm: VLM, exchange: list[dict[str, Any]] | None = None
) -> Callable[[np.ndarray, Sequence[Any], Sequence[str]], dict[int, str]]:
    """``assign(rgb, clusters, labels) -> {cluster_index: label}``: the VLM sees the image with the clusters
    outlined and numbered (``prompts/assign_labels.md``) and says which cluster is which label; labels it
    cannot place are left out. Each request and answer is appended to ``exchange``."""

    def assign(rgb: np.ndarray, clusters: Sequence[Any], labels: Sequence[str]) -> dict[int, str]:
        summaries = [_cluster_summary(c, i) for i, c in enumerate(clusters)]
        text = render_prompt("assign_labels", labels=list(labels), clusters=summaries)
        log = exchange if exchange is not None else []
        asked = ask(
            vlm,
            [text, _marked_image(rgb, clusters)],
            assign_schema(),
            lambda answer: check_json(answer, lambda data: _read_assignment(data, len(clusters), labels)),
            role="assign_labels",
            echo=echo_quoted,
            catch=(),
            record=lambda e: log.append(e.summary()),
        )
        checked = asked.result
        if checked is None or checked.value is None:
            problems = asked.verdicts[-1].errors
            raise LabelError(
                f"the VLM's cluster labels are unusable after a repair round: {'; '.join(problems)}"
            )
        return checked.value

    return assign


def _safe_name(label: str) -> str | None:
    try:
        return object_name(label)
    except LabelError:
        return None


def _read_assignment(data: Any, n: int, labels: Sequence[str]) -> tuple[dict[int, str], list[str]]:
    items = data.get("assignments") if isinstance(data, Mapping) else None
    if not isinstance(items, list):
        return {}, ['the answer must be {"assignments": [{"label": ..., "cluster": ...}, ...]}']
    by_name = {object_name(lab): lab for lab in labels}
    out: dict[int, str] = {}
    problems = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            problems.append(f"assignments[{i}] must be an object")
            continue
        label, cluster = item.get("label"), item.get("cluster")
        if not isinstance(label, str) or _safe_name(label) not in by_name:
            problems.append(f"assignments[{i}]: label {label!r} is not one of {list(labels)}")
            continue
        if isinstance(cluster, bool) or not isinstance(cluster, int) or not -1 <= cluster < n:
            problems.append(
                f"assignments[{i}]: cluster {cluster!r} must be an index 0..{n - 1}, or -1 if unseen"
            )
            continue
        if cluster == -1:
            continue
        if cluster in out:
            problems.append(f"assignments[{i}]: cluster {cluster} already labelled {out[cluster]!r}")
            continue
        out[cluster] = by_name[object_name(label)]
    return out, problems
