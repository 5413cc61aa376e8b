"""Physical parameters of reconstructed objects: VLM question answering (SIMPACT Supp. A.1) with a material
table as the offline fallback; every value records where it came from.

The VLM is asked, with the scene image, the questions of the paper's appendix A.1 in one request
(``prompts/physics.md``): rigid or deformable; for rigid objects mass and friction; for deformables
projective dynamics (``pd``) or MPM, Young's modulus, Poisson's ratio and density; for MPM the material from
{jelly, metal, sand, foam, plasticine}, friction angle and yield stress. A malformed answer gets one repair
round; a field still missing or out of range comes from the material table and says so in ``sources``.

Without a VLM the material table alone answers: a label's words (``"tomato soup can"`` → ``can``) pick an
entry holding the solver, a bulk density over the object's oriented bounding box (kg/m³; mass = bulk density
× box volume), friction and, for deformables, the elastic and plastic parameters.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from real2sim.types import PhysicalParameters
from simpact.core.errors import SimpactError
from simpact.core.vocab import OBJECT_KINDS as KINDS
from simpact.vlm import VLM
from simpact.vlm.answers import physics_schema
from simpact.vlm.ask import ask, check_json, echo_quoted
from simpact.vlm.prompts import render_prompt

__all__ = [
    "MATERIAL_TABLE",
    "MaterialEntry",
    "PhysicsEstimate",
    "PhysicsError",
    "estimate_physics",
    "lookup_material",
    "table_parameters",
]


class PhysicsError(SimpactError, ValueError):
    """Bad input to the parameter estimation (an object without a name, a non-positive extent...)."""


@dataclasses.dataclass(frozen=True)
class MaterialEntry:
    """One row of the material table; SI units."""

    kind: str
    """``rigid``, ``pd`` or ``mpm``."""
    bulk_density_kg_m3: float
    """Mass over the oriented bounding box's volume (kg/m³): a filled cardboard box ~200, a can ~800."""
    friction: float
    """Coulomb coefficient against the table and the fingers."""
    young_modulus_pa: float | None = None
    poisson_ratio: float | None = None
    density_kg_m3: float | None = None
    """Material density of a deformable (kg/m³)."""
    material: str | None = None
    """MPM material: jelly, metal, sand, foam or plasticine."""
    friction_angle_deg: float | None = None
    yield_stress_pa: float | None = None


_RIGID = "rigid"

#: Keyword → material entry. Bulk densities come from the YCB objects' masses over their box sizes
#: (cracker box 0.41 kg over 0.06 x 0.158 x 0.21 m ≈ 206 kg/m³, soup can ≈ 800, mustard bottle ≈ 575, bowl
#: ≈ 100); deformable values are typical of the SIMPACT / PhysGaussian settings for each material.
MATERIAL_TABLE: dict[str, MaterialEntry] = {
    # boxes and packaging
    "box": MaterialEntry(_RIGID, 250.0, 0.5),
    "carton": MaterialEntry(_RIGID, 200.0, 0.4),
    "cracker": MaterialEntry(_RIGID, 206.0, 0.5),
    "cereal": MaterialEntry(_RIGID, 150.0, 0.5),
    "sugar": MaterialEntry(_RIGID, 870.0, 0.5),
    "book": MaterialEntry(_RIGID, 700.0, 0.5),
    # metal and plastic containers
    "can": MaterialEntry(_RIGID, 800.0, 0.4),
    "tin": MaterialEntry(_RIGID, 800.0, 0.4),
    "spam": MaterialEntry(_RIGID, 930.0, 0.4),
    "bottle": MaterialEntry(_RIGID, 550.0, 0.5),
    "mustard": MaterialEntry(_RIGID, 575.0, 0.5),
    "cleanser": MaterialEntry(_RIGID, 600.0, 0.5),
    "jar": MaterialEntry(_RIGID, 700.0, 0.5),
    # dishes
    "bowl": MaterialEntry(_RIGID, 100.0, 0.6),
    "plate": MaterialEntry(_RIGID, 300.0, 0.5),
    "mug": MaterialEntry(_RIGID, 350.0, 0.6),
    "cup": MaterialEntry(_RIGID, 250.0, 0.6),
    # solids and tools
    "block": MaterialEntry(_RIGID, 600.0, 0.5),
    "cube": MaterialEntry(_RIGID, 600.0, 0.5),
    "wood": MaterialEntry(_RIGID, 600.0, 0.5),
    "brush": MaterialEntry(_RIGID, 300.0, 0.6),
    "ball": MaterialEntry(_RIGID, 150.0, 0.6),
    "fruit": MaterialEntry(_RIGID, 700.0, 0.6),
    "banana": MaterialEntry(_RIGID, 450.0, 0.6),
    "apple": MaterialEntry(_RIGID, 700.0, 0.6),
    "drill": MaterialEntry(_RIGID, 500.0, 0.6),
    "wall": MaterialEntry(_RIGID, 600.0, 0.5),
    # deformables: projective dynamics (stiff, keeps its topology)
    "rope": MaterialEntry("pd", 400.0, 0.6, 1.0e6, 0.3, 400.0),
    "cable": MaterialEntry("pd", 1200.0, 0.6, 5.0e6, 0.35, 1200.0),
    "cloth": MaterialEntry("pd", 200.0, 0.7, 1.0e5, 0.3, 200.0),
    "towel": MaterialEntry("pd", 200.0, 0.7, 1.0e5, 0.3, 200.0),
    # deformables: material point method
    "sponge": MaterialEntry("mpm", 40.0, 0.8, 3.0e4, 0.2, 40.0, "foam"),
    "foam": MaterialEntry("mpm", 40.0, 0.8, 3.0e4, 0.2, 40.0, "foam"),
    "dough": MaterialEntry("mpm", 1200.0, 0.8, 2.0e5, 0.3, 1200.0, "plasticine", yield_stress_pa=3.0e3),
    "plasticine": MaterialEntry("mpm", 1500.0, 0.8, 3.0e5, 0.3, 1500.0, "plasticine", yield_stress_pa=5.0e3),
    "clay": MaterialEntry("mpm", 1700.0, 0.8, 3.0e5, 0.3, 1700.0, "plasticine", yield_stress_pa=5.0e3),
    "jelly": MaterialEntry("mpm", 1000.0, 0.5, 1.0e4, 0.45, 1000.0, "jelly"),
    "tofu": MaterialEntry("mpm", 1050.0, 0.5, 3.0e4, 0.4, 1050.0, "jelly"),
    "sand": MaterialEntry("mpm", 1600.0, 0.6, 3.5e5, 0.3, 1600.0, "sand", friction_angle_deg=30.0),
    "beans": MaterialEntry("mpm", 800.0, 0.5, 3.5e5, 0.3, 800.0, "sand", friction_angle_deg=25.0),
    "rice": MaterialEntry("mpm", 850.0, 0.5, 3.5e5, 0.3, 850.0, "sand", friction_angle_deg=30.0),
}
DEFAULT_ENTRY = MaterialEntry(_RIGID, 300.0, 0.5)
"""Used when no word of the label is in the table."""

#: Plural and synonym words mapped onto table keys.
_ALIASES = {
    "boxes": "box",
    "cans": "can",
    "cheezit": "cracker",
    "crackers": "cracker",
    "bowls": "bowl",
    "mugs": "mug",
    "cups": "cup",
    "blocks": "block",
    "cubes": "cube",
    "bean": "beans",
    "grains": "rice",
    "jello": "jelly",
    "playdough": "dough",
    "bottles": "bottle",
    "soup": "can",
}

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


def _words(label: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", label.lower()) if w]


def lookup_material(label: str) -> tuple[str, MaterialEntry]:
    """The table entry for ``label``: its last word that the table knows (the head noun of "green bowl",
    "tomato soup can"), else the default. Returns (key, entry); the key is ``"default"`` for the default."""
    for word in reversed(_words(label)):
        key = _ALIASES.get(word, word)
        if key in MATERIAL_TABLE:
            return key, MATERIAL_TABLE[key]
        if word.endswith("s") and word[:-1] in MATERIAL_TABLE:
            return word[:-1], MATERIAL_TABLE[word[:-1]]
    return "default", DEFAULT_ENTRY


def _volume(extent: Sequence[float]) -> float:
    e = np.asarray(extent, dtype=float)
    if e.shape != (3,) or not np.all(np.isfinite(e)) or np.any(e <= 0):
        raise PhysicsError(f"extent must be 3 positive lengths (m), got {list(np.asarray(extent).ravel())}")
    return float(np.prod(e))


def table_parameters(
    label: str, extent: Sequence[float], volume_m3: float | None = None
) -> PhysicalParameters:
    """Parameters from the material table alone; mass = bulk density × box volume (or density × ``volume_m3``
    for deformables, the particles' volume when known)."""
    key, entry = lookup_material(label)
    box_volume = _volume(extent)
    if entry.kind == _RIGID:
        mass = entry.bulk_density_kg_m3 * box_volume
    else:
        density = entry.density_kg_m3 or entry.bulk_density_kg_m3
        mass = density * (volume_m3 if volume_m3 is not None else box_volume)
    params = PhysicalParameters(
        kind=entry.kind,
        mass_kg=float(mass),
        friction=entry.friction,
        young_modulus_pa=entry.young_modulus_pa,
        poisson_ratio=entry.poisson_ratio,
        density_kg_m3=entry.density_kg_m3,
        material=entry.material,
        friction_angle_deg=entry.friction_angle_deg,
        yield_stress_pa=entry.yield_stress_pa,
    )
    source = "material_table" if key != "default" else "default"
    params.sources = {f: source for f in _filled_fields(params)}
    return params


def _filled_fields(p: PhysicalParameters) -> list[str]:
    return [f.name for f in dataclasses.fields(p) if f.name != "sources" and getattr(p, f.name) is not None]


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
    return "_".join(_words(name))


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
    if kind == _RIGID:
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
        p.mass_kg = float(p.density_kg_m3 * (volume if volume is not None else _volume(extent)))
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
        if sim == _RIGID:
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
    deformable = p.kind != _RIGID
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
        p.mass_kg = float(p.density_kg_m3 * (volume if volume is not None else _volume(extent)))
        p.sources["mass_kg"] = p.sources.get("density_kg_m3", "material_table")
