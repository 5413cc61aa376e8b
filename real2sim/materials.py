"""The material table: what real2sim assumes about an object's physics without a VLM. A label's words
(``"tomato soup can"`` → ``can``) pick an entry holding the solver, a bulk density over the object's oriented
bounding box (kg/m³; mass = bulk density × box volume), friction and, for deformables, the elastic and
plastic parameters (:func:`table_parameters`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

import numpy as np

from real2sim.types import PhysicalParameters
from simpact.core.errors import SimpactError

__all__ = [
    "DEFAULT_ENTRY",
    "MATERIAL_TABLE",
    "MaterialEntry",
    "RIGID",
    "PhysicsError",
    "box_volume",
    "filled_fields",
    "label_tokens",
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


RIGID = "rigid"

#: Keyword → material entry. Bulk densities come from the YCB objects' masses over their box sizes
#: (cracker box 0.41 kg over 0.06 x 0.158 x 0.21 m ≈ 206 kg/m³, soup can ≈ 800, mustard bottle ≈ 575, bowl
#: ≈ 100); deformable values are typical of the SIMPACT / PhysGaussian settings for each material.
MATERIAL_TABLE: dict[str, MaterialEntry] = {
    # boxes and packaging
    "box": MaterialEntry(RIGID, 250.0, 0.5),
    "carton": MaterialEntry(RIGID, 200.0, 0.4),
    "cracker": MaterialEntry(RIGID, 206.0, 0.5),
    "cereal": MaterialEntry(RIGID, 150.0, 0.5),
    "sugar": MaterialEntry(RIGID, 870.0, 0.5),
    "book": MaterialEntry(RIGID, 700.0, 0.5),
    # metal and plastic containers
    "can": MaterialEntry(RIGID, 800.0, 0.4),
    "tin": MaterialEntry(RIGID, 800.0, 0.4),
    "spam": MaterialEntry(RIGID, 930.0, 0.4),
    "bottle": MaterialEntry(RIGID, 550.0, 0.5),
    "mustard": MaterialEntry(RIGID, 575.0, 0.5),
    "cleanser": MaterialEntry(RIGID, 600.0, 0.5),
    "jar": MaterialEntry(RIGID, 700.0, 0.5),
    # dishes
    "bowl": MaterialEntry(RIGID, 100.0, 0.6),
    "plate": MaterialEntry(RIGID, 300.0, 0.5),
    "mug": MaterialEntry(RIGID, 350.0, 0.6),
    "cup": MaterialEntry(RIGID, 250.0, 0.6),
    # solids and tools
    "block": MaterialEntry(RIGID, 600.0, 0.5),
    "cube": MaterialEntry(RIGID, 600.0, 0.5),
    "wood": MaterialEntry(RIGID, 600.0, 0.5),
    "brush": MaterialEntry(RIGID, 300.0, 0.6),
    "ball": MaterialEntry(RIGID, 150.0, 0.6),
    "fruit": MaterialEntry(RIGID, 700.0, 0.6),
    "banana": MaterialEntry(RIGID, 450.0, 0.6),
    "apple": MaterialEntry(RIGID, 700.0, 0.6),
    "drill": MaterialEntry(RIGID, 500.0, 0.6),
    "wall": MaterialEntry(RIGID, 600.0, 0.5),
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
DEFAULT_ENTRY = MaterialEntry(RIGID, 300.0, 0.5)
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


def label_tokens(label: str) -> list[str]:
    return [w for w in re.split(r"[^a-z0-9]+", label.lower()) if w]


def lookup_material(label: str) -> tuple[str, MaterialEntry]:
    """The table entry for ``label``: its last word that the table knows (the head noun of "green bowl",
    "tomato soup can"), else the default. Returns (key, entry); the key is ``"default"`` for the default."""
    for word in reversed(label_tokens(label)):
        key = _ALIASES.get(word, word)
        if key in MATERIAL_TABLE:
            return key, MATERIAL_TABLE[key]
        if word.endswith("s") and word[:-1] in MATERIAL_TABLE:
            return word[:-1], MATERIAL_TABLE[word[:-1]]
    return "default", DEFAULT_ENTRY


def box_volume(extent: Sequence[float]) -> float:
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
    volume_box = box_volume(extent)
    if entry.kind == RIGID:
        mass = entry.bulk_density_kg_m3 * volume_box
    else:
        density = entry.density_kg_m3 or entry.bulk_density_kg_m3
        mass = density * (volume_m3 if volume_m3 is not None else volume_box)
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
    params.sources = {f: source for f in filled_fields(params)}
    return params


def filled_fields(p: PhysicalParameters) -> list[str]:
    return [f.name for f in dataclasses.fields(p) if f.name != "sources" and getattr(p, f.name) is not None]
