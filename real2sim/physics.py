"""Physical parameters of reconstructed objects: VLM question answering (SIMPACT Supp. A.1) with a material
table as the offline fallback; every value records where it came from.

The VLM is asked, with the scene image, the questions of the paper's appendix A.1 in one request
(``prompts/physics.md``): rigid or deformable; for rigid objects mass and friction; for deformables
projective dynamics (``pd``) or MPM, Young's modulus, Poisson's ratio and density; for MPM the material from
{jelly, metal, sand, foam, plasticine}, friction angle and yield stress. A malformed answer gets one repair
round; a field still missing or out of range comes from the material table and says so in ``sources``.

Without a VLM the material table (:mod:`real2sim.materials`) alone answers.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from real2sim.materials import (
    MATERIAL_TABLE,
    RIGID,
    MaterialEntry,
    PhysicsError,
    box_volume,
    label_tokens,
    lookup_material,
    table_parameters,
)
from real2sim.types import PhysicalParameters
from simpact.core.vocab import OBJECT_KINDS as KINDS
from simpact.vlm import VLM
from simpact.vlm.answers import physics_schema
from simpact.vlm.ask import ask, check_json, echo_quoted
from simpact.vlm.prompts import render_prompt

__all__ = ["PhysicsEstimate", "estimate_physics"]


#: Accepted ranges (inclusive) for VLM values; outside them the table's value is used instead.
_RANGES: dict[str, tuple[float, float]] = {
    "mass_kg": (1e-4, 50.0),
    "friction": (0.0, 2.0),
    "young_modulus_pa": (1.0, 1e12),
    "poisson_ratio": (0.0, 0.499),
    "density_kg_m3": (1.0, 25000.0),
    "friction_angle_deg": (0.0, 90.0),
    "yield_stress_pa": (0.0, 1e10),
}
#: VLM answer keys → PhysicalParameters fields.
_VLM_FIELDS = {
    "mass_kg": "mass_kg",
    "friction": "friction",
    "youngs_modulus_pa": "young_modulus_pa",
    "poissons_ratio": "poisson_ratio",
    "density_kg_m3": "density_kg_m3",
    "friction_angle_deg": "friction_angle_deg",
    "yield_stress_pa": "yield_stress_pa",
}
_ELASTIC = ("young_modulus_pa", "poisson_ratio", "density_kg_m3")
_MPM_MATERIALS = ("jelly", "metal", "sand", "foam", "plasticine")
#: Defaults per MPM material, for a VLM that names a material but leaves a value out.
_MPM_DEFAULTS: dict[str, MaterialEntry] = {
    "jelly": MATERIAL_TABLE["jelly"],
    "foam": MATERIAL_TABLE["foam"],
    "sand": MATERIAL_TABLE["sand"],
    "plasticine": MATERIAL_TABLE["plasticine"],
    "metal": MaterialEntry("mpm", 7800.0, 0.4, 2.0e8, 0.3, 7800.0, "metal", yield_stress_pa=1.0e6),
}


@dataclasses.dataclass
class PhysicsEstimate:
    """Parameters per object name, with the table entry and the VLM's reason behind each, and the VLM
    exchange (prompt texts, answers) so a run can be inspected and replayed."""

    parameters: dict[str, PhysicalParameters]
    notes: dict[str, dict[str, Any]]
    """Per object: ``table_entry`` (the material table key) and ``vlm_reason`` when the VLM answered."""
    exchange: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    """Each VLM request's role, prompt text and answer text (no images)."""
    warnings: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "objects": {
                name: {**p.to_dict(), **self.notes.get(name, {})} for name, p in self.parameters.items()
            },
            "warnings": list(self.warnings),
        }


def _norm(name: str) -> str:
    return "_".join(label_tokens(name))


def estimate_physics(
    objects: Mapping[str, Sequence[float]],
    *,
    vlm: VLM | None = None,
    image: np.ndarray | None = None,
    instruction: str | None = None,
    labels: Mapping[str, str] | None = None,
    volumes_m3: Mapping[str, float] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    override_source: str = "task",
    kinds: Mapping[str, str] | None = None,
    kind_sources: Mapping[str, str] | None = None,
) -> PhysicsEstimate:
    """Physical parameters for each object.

    ``objects`` maps an object name to its oriented-box extent (m). ``vlm`` (a :class:`simpact.vlm.VLM`)
    answers the A.1 questions from ``image`` (uint8 (H, W, 3)) and ``instruction``; without one the material
    table answers. ``labels`` gives each name's detector phrase (default: the name). ``volumes_m3`` the
    volume of a deformable's particles. ``overrides`` sets fields per object (e.g. a task's mass and
    friction), recorded as ``override_source``; ``kinds`` forces an object's solver (source ``user``, or the
    name's entry in ``kind_sources``, e.g. ``task``).
    VLM errors (no key, a failed request) propagate: a configured VLM that cannot answer is the user's to fix.
    """
    if not objects:
        raise PhysicsError("no objects to estimate parameters for")
    labels = dict(labels or {})
    volumes = dict(volumes_m3 or {})
    estimate = PhysicsEstimate({}, {})
    for name, extent in objects.items():
        if not name:
            raise PhysicsError("an object has an empty name")
        label = labels.get(name, name.replace("_", " "))
        estimate.parameters[name] = table_parameters(label, extent, volumes.get(name))
        estimate.notes[name] = {"table_entry": lookup_material(label)[0]}
    if vlm is not None:
        _ask_vlm(estimate, objects, vlm, image, instruction, labels, volumes)
    for name, kind in (kinds or {}).items():
        if kind not in KINDS:
            raise PhysicsError(f"object '{name}': kind must be one of {KINDS}, got {kind!r}")
        if name in estimate.parameters:
            source = (kind_sources or {}).get(name, "user")
            p = estimate.parameters[name]
            _set_kind(p, kind, labels.get(name, name), objects[name], volumes.get(name), source)
    for name, fields in (overrides or {}).items():
        if name not in estimate.parameters:
            continue
        p = estimate.parameters[name]
        for field, value in fields.items():
            if not hasattr(p, field) or field == "sources":
                raise PhysicsError(f"object '{name}': no physical parameter named {field!r}")
            setattr(p, field, value)
            p.sources[field] = override_source
    return estimate


def _set_kind(
    p: PhysicalParameters,
    kind: str,
    label: str,
    extent: Sequence[float],
    volume: float | None,
    source: str = "user",
) -> None:
    """Force the solver; fill the elastic fields a deformable needs from the table (or an MPM default), or
    drop them for a rigid body."""
    if p.kind == kind:
        p.sources["kind"] = source
        return
    p.kind = kind
    p.sources["kind"] = source
    if kind == RIGID:
        for name in (
            "young_modulus_pa",
            "poisson_ratio",
            "material",
            "friction_angle_deg",
            "yield_stress_pa",
        ):
            setattr(p, name, None)
            p.sources.pop(name, None)
        if p.density_kg_m3 is not None:
            p.density_kg_m3 = None  # the mass (density x volume) stays, as the rigid body's mass
            p.sources.pop("density_kg_m3", None)
        return
    _, entry = lookup_material(label)
    if entry.kind != kind or entry.young_modulus_pa is None:
        entry = MATERIAL_TABLE["rope"] if kind == "pd" else _MPM_DEFAULTS["plasticine"]
    _fill_deformable(p, entry, "material_table", extent, volume)


def _fill_deformable(
    p: PhysicalParameters,
    entry: MaterialEntry,
    source: str,
    extent: Sequence[float],
    volume: float | None,
    only_missing: bool = False,
) -> None:
    names = list(_ELASTIC)
    if p.kind == "mpm":
        names += ["material", "friction_angle_deg", "yield_stress_pa"]
    for name in names:
        if only_missing and getattr(p, name) is not None:
            continue
        value = getattr(entry, name)
        setattr(p, name, value)
        if value is not None:
            p.sources[name] = source
        else:
            p.sources.pop(name, None)
    if p.density_kg_m3 is not None:
        p.mass_kg = float(p.density_kg_m3 * (volume if volume is not None else box_volume(extent)))
        p.sources["mass_kg"] = p.sources.get("density_kg_m3", source)


def _physics_request(
    names: Sequence[str],
    objects: Mapping[str, Sequence[float]],
    labels: Mapping[str, str],
    image: np.ndarray | None,
    instruction: str | None,
) -> list[Any]:
    """The prompt (``prompts/physics.md``) listing each object's name, label and size (m), then the image."""
    listing = [
        {
            "name": n,
            "label": labels.get(n, n.replace("_", " ")),
            "size_m": [round(float(v), 3) for v in objects[n]],
        }
        for n in names
    ]
    text = render_prompt("physics", task=instruction or "(no instruction given)", objects=listing)
    parts: list[Any] = [text]
    if image is not None:
        parts.append(np.ascontiguousarray(image))
    return parts


def _ask_vlm(
    estimate: PhysicsEstimate,
    objects: Mapping[str, Sequence[float]],
    vlm: VLM,
    image: np.ndarray | None,
    instruction: str | None,
    labels: Mapping[str, str],
    volumes: Mapping[str, float],
) -> None:
    names = list(objects)
    asked = ask(
        vlm,
        _physics_request(names, objects, labels, image, instruction),
        physics_schema(),
        lambda answer: check_json(answer, lambda data: _entries(data, names)),
        role="physics",
        echo=echo_quoted,
        catch=(),
        record=lambda e: estimate.exchange.append(e.summary()),
    )
    entries: dict[str, dict[str, Any]] = {}
    for verdict in asked.verdicts:  # what the first answer got right stays unless the repair restates it
        entries.update(verdict.value or {})
    if asked.repairs:
        estimate.warnings.extend(f"physics VLM answer: {p}" for p in asked.verdicts[-1].errors)
    for name in names:
        raw = entries.get(name)
        if raw is None:
            estimate.warnings.append(f"physics VLM gave nothing for '{name}': material table used")
            continue
        _apply_answer(
            estimate.parameters[name],
            raw,
            objects[name],
            volumes.get(name),
            labels.get(name, name),
            functools.partial(_warn, estimate.warnings, name),
        )
        if isinstance(raw.get("reason"), str):
            estimate.notes[name]["vlm_reason"] = raw["reason"]


def _warn(warnings: list[str], name: str, message: str) -> None:
    warnings.append(f"'{name}': {message}")


def _entries(data: Any, names: Sequence[str]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The answer's per-object entries keyed by our names, and what was wrong with the answer."""
    items = data.get("objects") if isinstance(data, Mapping) else data
    if not isinstance(items, list):
        return {}, ['the answer must be {"objects": [...]} with one entry per object']
    by_norm = {_norm(n): n for n in names}
    out: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            problems.append(f"objects[{i}] must be an object with a 'name'")
            continue
        name = by_norm.get(_norm(item["name"]))
        if name is None:
            problems.append(f"objects[{i}]: unknown object {item['name']!r}; the objects are {list(names)}")
            continue
        out[name] = dict(item)
    missing = [n for n in names if n not in out]
    if missing:
        problems.append(f"no entry for {missing}")
    return out, problems


def _number(raw: Mapping[str, Any], key: str, field: str, warn: Callable[[str], None]) -> float | None:
    if key not in raw or raw[key] is None:
        return None
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        warn(f"{key} = {value!r} is not a number: material table used")
        return None
    lo, hi = _RANGES[field]
    if not lo <= value <= hi:
        warn(f"{key} = {value!r} outside [{lo:g}, {hi:g}]: material table used")
        return None
    return float(value)


def _apply_answer(
    p: PhysicalParameters,
    raw: Mapping[str, Any],
    extent: Sequence[float],
    volume: float | None,
    label: str,
    warn: Callable[[str], None],
) -> None:
    """Overwrite the table's values with the VLM's valid ones (source ``vlm``)."""
    sim = raw.get("simulator")
    if sim not in KINDS:
        warn(f"simulator {sim!r} is not one of {KINDS}: material table's '{p.kind}' used")
    elif sim != p.kind:
        p.kind = sim
        if sim == RIGID:
            for name in ("young_modulus_pa", "poisson_ratio", "density_kg_m3", "material"):
                setattr(p, name, None)
                p.sources.pop(name, None)
            p.friction_angle_deg = p.yield_stress_pa = None
            p.sources.pop("friction_angle_deg", None)
            p.sources.pop("yield_stress_pa", None)
        else:
            # Seed the deformable's fields from the table (or the named MPM material); the VLM's values
            # below replace them.
            _, entry = lookup_material(label)
            material = raw.get("material")
            if sim == "mpm" and material in _MPM_DEFAULTS:
                entry = _MPM_DEFAULTS[material]
            elif entry.kind != sim or entry.young_modulus_pa is None:
                entry = MATERIAL_TABLE["rope"] if sim == "pd" else _MPM_DEFAULTS["plasticine"]
            _fill_deformable(p, entry, "material_table", extent, volume)
    if sim in KINDS:
        p.sources["kind"] = "vlm"
    if p.kind == "mpm":
        material = raw.get("material")
        if material in _MPM_MATERIALS:
            if material != p.material:
                _fill_deformable(p, _MPM_DEFAULTS[material], "material_table", extent, volume)
            p.material = material
            p.sources["material"] = "vlm"
        elif material is not None:
            warn(f"material {material!r} is not one of {_MPM_MATERIALS}: '{p.material}' used")
    deformable = p.kind != RIGID
    for key, field in _VLM_FIELDS.items():
        if field in ("friction_angle_deg", "yield_stress_pa") and p.kind != "mpm":
            continue
        if field in _ELASTIC and not deformable:
            continue
        if field == "mass_kg" and deformable:
            continue  # a deformable's mass follows from its density and volume
        value = _number(raw, key, field, warn)
        if value is not None:
            setattr(p, field, value)
            p.sources[field] = "vlm"
    if deformable and p.density_kg_m3 is not None:
        p.mass_kg = float(p.density_kg_m3 * (volume if volume is not None else box_volume(extent)))
        p.sources["mass_kg"] = p.sources.get("density_kg_m3", "material_table")
