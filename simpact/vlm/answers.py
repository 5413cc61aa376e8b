"""Turn whatever a VLM said into a typed result, never an exception.

:func:`parse_json` finds the JSON in an answer (plain, in a code fence, inside prose, with trailing commas,
or truncated where closing it is unambiguous) and otherwise says why there is none: empty, a refusal, no
JSON, truncated. :func:`parse_plan` validates a plan answer with :class:`simpact.core.actions.Plan` (the one
place the action vocabulary lives), clamping out-of-range parameters to their range and recording each
clamp, or rejecting them with the reason (what to fix in a repair round: :mod:`simpact.vlm.ask`). The JSON
schemas each role answers with are built here, the plan's from ``ACTION_SPECS``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from simpact.core.actions import ACTION_SPECS, Action, Plan, PlanError
from simpact.vlm import VLMAnswer

__all__ = [
    "FIELD_UNITS",
    "MATERIALS",
    "SIMULATORS",
    "AnswerKind",
    "Clamp",
    "EvaluationAnswer",
    "JSONAnswer",
    "PlanAnswer",
    "describe_actions",
    "evaluation_schema",
    "object_labels_schema",
    "parse_evaluation",
    "parse_json",
    "parse_plan",
    "physics_schema",
    "plan_schema",
]

FIELD_UNITS: dict[str, str] = {"dx": "m", "dy": "m", "dz": "m", "d": "m", "dyaw": "rad"}
"""Unit of each action parameter (metres, radians)."""
SIMULATORS = ("rigid", "pd", "mpm")
"""Solver kinds a physics answer may choose: MuJoCo rigid body, projective dynamics, material point method."""
MATERIALS = ("jelly", "metal", "sand", "foam", "plasticine")
"""MPM material types (paper Supp. A.1)."""

_REFUSAL_FINISH = {
    "SAFETY",
    "REFUSAL",
    "CONTENT_FILTER",
    "RECITATION",
    "PROHIBITED_CONTENT",
    "BLOCKLIST",
    "SPII",
}
_LENGTH_FINISH = {"MAX_TOKENS", "LENGTH"}
_REFUSAL_TEXT = re.compile(
    r"^\W*(i'?m sorry|i am sorry|sorry|i can(?:'|no)?t|i cannot|i'?m (?:not able|unable)"
    r"|i am (?:not able|unable)|i won'?t|i will not|as an ai|unfortunately,? i)",
    re.I,
)
_CLOSED_FENCE = re.compile(r"```[ \t]*[a-zA-Z]*[ \t]*\n?(.*?)```", re.S)
_MAX_STARTS = 200
_TRAILING_COMMA = re.compile(r",\s*[}\]]")


class AnswerKind(str, Enum):
    """What kind of answer came back."""

    OK = "ok"
    EMPTY = "empty"
    REFUSAL = "refusal"
    NO_JSON = "no_json"
    TRUNCATED = "truncated"
    INVALID = (
        "invalid"  # JSON, but not what the role asks for (missing fields, wrong types, unknown action...)
    )


@dataclass(frozen=True)
class JSONAnswer:
    """The JSON found in an answer (``data``), or why there is none (``kind``, ``error``). ``notes`` say what
    was tolerated (a code fence, prose, closed brackets)."""

    kind: AnswerKind
    data: Any = None
    error: str | None = None
    notes: tuple[str, ...] = ()
    text: str = ""

    @property
    def ok(self) -> bool:
        return self.kind is AnswerKind.OK


@dataclass(frozen=True)
class Clamp:
    """One parameter moved into its range: action ``index`` (0-based), its ``type``, the ``field``, the value
    asked for and the value used (SI units)."""

    index: int
    type: str
    field: str
    value: float
    clamped: float
    low: float
    high: float

    def __str__(self) -> str:
        return (
            f"action {self.index} ({self.type}): {self.field} = {self.value:g} clamped to {self.clamped:g} "
            f"(range [{self.low:g}, {self.high:g}])"
        )


@dataclass(frozen=True)
class PlanAnswer:
    """A plan answer: the validated ``plan`` when ``ok``, else the ``errors`` to send back for repair."""

    kind: AnswerKind
    plan: Plan | None = None
    errors: tuple[str, ...] = ()
    clamps: tuple[Clamp, ...] = ()
    notes: tuple[str, ...] = ()
    data: Any = None
    text: str = ""

    @property
    def ok(self) -> bool:
        return self.kind is AnswerKind.OK


@dataclass(frozen=True)
class EvaluationAnswer:
    """A TaskSuccess answer: ``success`` (None when unusable) and the VLM's ``reason``."""

    kind: AnswerKind
    success: bool | None = None
    reason: str = ""
    errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    text: str = ""

    @property
    def ok(self) -> bool:
        return self.kind is AnswerKind.OK


# --- finding the JSON ---------------------------------------------------------------------------------------


def _text_and_finish(answer: VLMAnswer | str | None) -> tuple[str, str | None]:
    if answer is None:
        return "", None
    if isinstance(answer, VLMAnswer):
        return answer.text or "", (answer.finish_reason or "").upper() or None
    return str(answer), None


def _strip_trailing_commas(s: str) -> str:
    """Drop commas directly before ``}`` or ``]`` outside strings."""
    out: list[str] = []
    in_str = esc = False
    for ch in s:
        if in_str:
            in_str = not (ch == '"' and not esc)
            esc = ch == "\\" and not esc
        elif ch == '"':
            in_str = True
        elif ch in "}]":
            while out and out[-1].isspace():
                out.pop()
            if out and out[-1] == ",":
                out.pop()
        out.append(ch)
    return "".join(out)


def _decode_at(text: str, start: int) -> tuple[Any, int] | None:
    """Decode one JSON value starting at ``start``; returns it and its length, tolerating trailing commas."""
    decoder = json.JSONDecoder()
    try:
        value, end = decoder.raw_decode(text, start)
        return value, end - start
    except json.JSONDecodeError:
        if not _TRAILING_COMMA.search(text, start):
            return None
    tail = _strip_trailing_commas(text[start:])
    try:
        value, end = decoder.raw_decode(tail)
        return value, end
    except json.JSONDecodeError:
        return None


def _find_json(text: str) -> tuple[Any, str, int] | None:
    """The longest JSON object or array in ``text`` (or None), with a note on where it was and its start."""
    stripped = text.strip()
    whole = _decode_at(stripped, 0) if stripped[:1] in "{[" else None
    if whole is not None and whole[1] == len(stripped):
        return whole[0], "", text.index(stripped[0])
    for match in _CLOSED_FENCE.finditer(text):
        body = match.group(1).strip()
        found = _decode_at(body, 0) if body[:1] in "{[" else None
        if found is not None and found[1] == len(body):
            return found[0], "took the JSON from a code fence", match.start(1)
    best: tuple[Any, int, int] | None = None
    covered = -1
    for i in _json_starts(text):
        if i < covered:
            continue  # inside a value already found
        found = _decode_at(text, i)
        if found is not None and isinstance(found[0], (dict, list)):
            covered = i + found[1]
            if best is None or found[1] > best[1]:
                best = (found[0], found[1], i)
    if best is not None:
        return best[0], "ignored text around the JSON", best[2]
    return None


def _json_starts(text: str) -> list[int]:
    """Where JSON may begin: a bracket followed by what JSON allows there (prose like "[the" or "{x}" is
    not), at most ``_MAX_STARTS`` of them."""
    starts = []
    for m in re.finditer(r"[{\[]", text):
        rest = text[m.end() : m.end() + 64].lstrip()
        if not rest or rest[0] in '"{}[]-0123456789':
            starts.append(m.start())
            if len(starts) == _MAX_STARTS:
                break
    return starts


def _scan(s: str) -> tuple[list[str], bool, list[tuple[int, list[str]]], bool]:
    """Open brackets at the end of ``s``, whether it ends inside a string, each comma's position with the
    brackets open there, and whether the first bracket was ever closed."""
    stack: list[str] = []
    commas: list[tuple[int, list[str]]] = []
    in_str = esc = closed = False
    for i, ch in enumerate(s):
        if in_str:
            in_str = not (ch == '"' and not esc)
            esc = ch == "\\" and not esc
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if stack and stack[-1] == ch:
                stack.pop()
                closed = closed or not stack
        elif ch == ",":
            commas.append((i, list(stack)))
    return stack, in_str, commas, closed


def _close_truncated(s: str) -> tuple[Literal["closed", "truncated", "malformed"], Any, str]:
    """Repair JSON cut off at the end: (status, value, description).

    ``closed``: the text ends right after a complete object or array, so every value written is whole and
    closing the open brackets is unambiguous. ``truncated``: it stops mid-value; the value up to the last
    complete element (or None) is returned for the record only. ``malformed``: nothing is left open.
    """
    stack, in_str, commas, _ = _scan(s)
    body = s.rstrip()
    if not stack and not in_str:
        try:
            json.loads(body)
        except json.JSONDecodeError as exc:
            return "malformed", None, f"the JSON does not parse ({exc.msg} at character {exc.pos})"
    closers = "".join(reversed(stack))
    if not in_str and body.endswith(("}", "]")):
        try:
            value = json.loads(_strip_trailing_commas(body + closers))
            return "closed", value, f"closed {len(stack)} bracket(s) the answer left open"
        except json.JSONDecodeError:
            pass
    tail = body[-40:].replace("\n", " ")
    why = f"the JSON stops mid-way (it ends with {tail!r}, {len(stack)} bracket(s) open)"
    for i, open_there in reversed(commas[-_MAX_STARTS:]):
        try:
            return "truncated", json.loads(_strip_trailing_commas(s[:i] + "".join(reversed(open_there)))), why
        except json.JSONDecodeError:
            continue
    return "truncated", None, why


def parse_json(answer: VLMAnswer | str | None) -> JSONAnswer:
    """Find the JSON in an answer; never raises."""
    text, finish = _text_and_finish(answer)
    refused = finish is not None and (finish in _REFUSAL_FINISH or finish.startswith("BLOCKED"))
    if not text.strip():
        if refused:
            return JSONAnswer(
                AnswerKind.REFUSAL, error=f"the model declined to answer (finish reason {finish})"
            )
        why = f" (finish reason {finish})" if finish else ""
        return JSONAnswer(AnswerKind.EMPTY, error=f"the answer was empty{why}", text=text)
    found = _find_json(text)
    start = next(iter(_json_starts(text)), None)
    enclosing = start is not None and (found is None or found[2] > start)
    if found is not None and not (enclosing and not _scan(text[start:])[3]):
        value, note, _ = found
        return JSONAnswer(AnswerKind.OK, value, notes=(note,) if note else (), text=text)
    if start is not None and not _REFUSAL_TEXT.match(text):
        # JSON begins at ``start`` and never ends (or does not parse): close it, or say it was cut off.
        status, value, how = _close_truncated(text[start:])
        if status == "closed":
            return JSONAnswer(AnswerKind.OK, value, notes=(how,), text=text)
        if status == "truncated":
            cut = f" ({finish})" if finish in _LENGTH_FINISH else ""
            return JSONAnswer(
                AnswerKind.TRUNCATED, value, error=f"the answer was cut off{cut}: {how}", text=text
            )
        return JSONAnswer(AnswerKind.NO_JSON, error=f"{how}: {_clip(text)}", text=text)
    if refused or _REFUSAL_TEXT.match(text):
        return JSONAnswer(AnswerKind.REFUSAL, error=f"the model declined: {_clip(text)}", text=text)
    return JSONAnswer(AnswerKind.NO_JSON, error=f"the answer has no JSON object: {_clip(text)}", text=text)


def _clip(text: str, n: int = 120) -> str:
    one = " ".join(text.split())
    return repr(one if len(one) <= n else one[: n - 3] + "...")


# --- plans --------------------------------------------------------------------------------------------------


def _unwrap_plan(data: Any) -> tuple[Any, str | None]:
    """Accept a bare list of actions, or a plan under ``plan``/``proposal``/``answer``."""
    if isinstance(data, list):
        return {"actions": data}, "the answer was a bare list of actions"
    if isinstance(data, Mapping) and "actions" not in data:
        for key in ("plan", "proposal", "answer"):
            inner = data.get(key)
            if isinstance(inner, Mapping) and "actions" in inner:
                return inner, f"took the plan from the '{key}' field"
            if isinstance(inner, list):
                rest = {k: v for k, v in data.items() if k != key}
                return {**rest, "actions": inner}, f"took the actions from the '{key}' field"
    return data, None


def _coerce_and_clamp(raw: Any, index: int, clamp: bool) -> tuple[Any, list[Clamp], list[str]]:
    """Numeric strings become numbers; with ``clamp``, finite out-of-range values move to the range's edge."""
    if not isinstance(raw, Mapping):
        return raw, [], []
    kind = raw.get("type")
    spec = ACTION_SPECS.get(kind.upper()) if isinstance(kind, str) else None
    if spec is None:
        return raw, [], []
    fixed = dict(raw)
    clamps: list[Clamp] = []
    notes: list[str] = []
    for name, (lo, hi) in zip(spec.fields, spec.ranges):
        value = fixed.get(name)
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                continue
            fixed[name] = value = number
            notes.append(f"action {index}: read {name} {raw[name]!r} as the number {number:g}")
        if clamp and isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            if not lo <= value <= hi:
                used = min(max(float(value), lo), hi)
                fixed[name] = used
                clamps.append(Clamp(index, kind.upper(), name, float(value), used, lo, hi))  # type: ignore[union-attr]
    return fixed, clamps, notes


def parse_plan(
    answer: VLMAnswer | str | Mapping[str, Any] | None,
    *,
    out_of_range: Literal["clamp", "reject"] = "clamp",
) -> PlanAnswer:
    """Validate a plan answer (text, a :class:`VLMAnswer`, or already-parsed JSON); never raises.

    Every action is checked, so one repair round can fix all of them. With ``out_of_range="clamp"`` a finite
    parameter outside its range is moved to the nearest edge and listed in ``clamps``; with ``"reject"`` it
    is an error that gives the range.
    """
    if isinstance(answer, Mapping):
        parsed = JSONAnswer(AnswerKind.OK, dict(answer), text=json.dumps(answer, default=str))
    else:
        parsed = parse_json(answer)
    if not parsed.ok:
        why = (parsed.error,) if parsed.error else ()
        return PlanAnswer(parsed.kind, errors=why, notes=parsed.notes, data=parsed.data, text=parsed.text)
    data, note = _unwrap_plan(parsed.data)
    notes = list(parsed.notes) + ([note] if note else [])
    errors: list[str] = []
    clamps: list[Clamp] = []
    actions = data.get("actions") if isinstance(data, Mapping) else None
    if isinstance(data, Mapping) and isinstance(actions, list):
        fixed = []
        for i, raw in enumerate(actions):
            action, clamped, coerced = _coerce_and_clamp(raw, i, out_of_range == "clamp")
            clamps += clamped
            notes += coerced
            fixed.append(action)
            try:
                Action.from_dict(action, i)
            except PlanError as exc:
                errors.append(str(exc))
        data = {**data, "actions": fixed}
    plan = None
    if not errors:
        try:
            plan = Plan.from_dict(data)
        except PlanError as exc:
            errors.append(str(exc))
    kind = AnswerKind.INVALID if errors else AnswerKind.OK
    return PlanAnswer(kind, plan, tuple(errors), tuple(clamps), tuple(notes), parsed.data, parsed.text)


# --- TaskSuccess --------------------------------------------------------------------------------------------

_YES = {"yes", "true", "success", "succeeded", "y"}
_NO = {"no", "false", "failure", "failed", "fail", "n"}


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        word = value.strip().strip(".!").lower()
        return True if word in _YES else False if word in _NO else None
    return None


def parse_evaluation(answer: VLMAnswer | str | None) -> EvaluationAnswer:
    """Read a TaskSuccess answer ``{"reason": ..., "success": true|false}``; a bare leading yes/no is accepted
    too. Never raises."""
    parsed = parse_json(answer)
    if parsed.ok and isinstance(parsed.data, Mapping):
        data = parsed.data
        raw = next((data[k] for k in ("success", "task_success", "TaskSuccess") if k in data), None)
        success = _as_bool(raw)
        reason = data.get("reason", "")
        if success is None:
            error = (
                f"'success' must be true or false, got {raw!r}" if raw is not None else "'success' is missing"
            )
            return EvaluationAnswer(
                AnswerKind.INVALID, None, str(reason), (error,), parsed.notes, parsed.text
            )
        return EvaluationAnswer(AnswerKind.OK, success, str(reason), (), parsed.notes, parsed.text)
    if parsed.kind is AnswerKind.NO_JSON:
        first = re.match(r"\W*(\w+)", parsed.text)
        verdict = _as_bool(first.group(1)) if first else None
        if verdict is not None:
            note = ("read a plain yes/no answer",)
            return EvaluationAnswer(AnswerKind.OK, verdict, parsed.text.strip(), (), note, parsed.text)
    if parsed.ok:
        error = f"expected a JSON object with 'success' and 'reason', got {type(parsed.data).__name__}"
        return EvaluationAnswer(AnswerKind.INVALID, errors=(error,), notes=parsed.notes, text=parsed.text)
    return EvaluationAnswer(parsed.kind, errors=(parsed.error or parsed.kind.value,), text=parsed.text)


# --- schemas ------------------------------------------------------------------------------------------------


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def describe_actions() -> str:
    """The action vocabulary as prompt text, one line per action with each parameter's unit and range."""
    lines = []
    for name, spec in ACTION_SPECS.items():
        params = [
            f"{f} in [{_fmt(lo)}, {_fmt(hi)}] {FIELD_UNITS.get(f, '')}".rstrip()
            for f, (lo, hi) in zip(spec.fields, spec.ranges)
        ]
        head = f"{name}({', '.join(spec.fields)})" if spec.fields else name
        lines.append(f"- {head}: {spec.doc}" + (f"; {'; '.join(params)}" if params else ""))
    return "\n".join(lines)


def plan_schema() -> dict[str, Any]:
    """JSON schema of a plan answer, one ``anyOf`` branch per action in ``ACTION_SPECS``."""
    branches = []
    for name, spec in ACTION_SPECS.items():
        props: dict[str, Any] = {"type": {"type": "string", "enum": [name]}}
        for f, (lo, hi) in zip(spec.fields, spec.ranges):
            props[f] = {
                "type": "number",
                "minimum": lo,
                "maximum": hi,
                "description": f"{FIELD_UNITS.get(f, '')}".strip(),
            }
        props["reason"] = {"type": "string"}
        branches.append(
            {
                "type": "object",
                "title": name,
                "description": spec.doc,
                "properties": props,
                "required": ["type", *spec.fields],
            }
        )
    return {
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "actions": {"type": "array", "minItems": 1, "items": {"anyOf": branches}},
        },
        "required": ["description", "actions"],
    }


def evaluation_schema() -> dict[str, Any]:
    """JSON schema of a TaskSuccess answer: the reason first, then the verdict."""
    return {
        "type": "object",
        "properties": {"reason": {"type": "string"}, "success": {"type": "boolean"}},
        "required": ["reason", "success"],
    }


def object_labels_schema() -> dict[str, Any]:
    """JSON schema of an object-labels answer: short detector-ready noun phrases and each object's role."""
    return {
        "type": "object",
        "properties": {
            "objects": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "label": {"type": "string"},
                        "role": {"type": "string", "enum": ["manipulated", "target", "obstacle", "other"]},
                    },
                    "required": ["label", "role"],
                },
            }
        },
        "required": ["objects"],
    }


def physics_schema() -> dict[str, Any]:
    """JSON schema of a physics-parameters answer (paper Supp. A.1), SI units in the field names."""

    def num(minimum: float, maximum: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "number", "minimum": minimum}
        if maximum is not None:
            out["maximum"] = maximum
        return out

    obj = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "deformable": {"type": "boolean"},
            "simulator": {"type": "string", "enum": list(SIMULATORS)},
            "reason": {"type": "string"},
            "mass_kg": num(0.0),
            "friction": num(0.0, 2.0),
            "material": {"type": "string", "enum": list(MATERIALS)},
            "youngs_modulus_pa": num(0.0),
            "poissons_ratio": num(0.0, 0.5),
            "density_kg_m3": num(0.0),
            "friction_angle_deg": num(0.0, 90.0),
            "yield_stress_pa": num(0.0),
        },
        "required": ["name", "deformable", "simulator", "reason"],
    }
    return {
        "type": "object",
        "properties": {"objects": {"type": "array", "items": obj}},
        "required": ["objects"],
    }
