"""MPM materials (the SIMPACT paper's appendix A.1: jelly, metal, sand, foam, plasticine) and their
parameters, read from a scene object's ``material`` mapping. Units: Pa, kg/m^3, degrees, Pa s."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simpact.core.scene import SceneError

__all__ = ["MODELS", "Material"]

MODELS = ("jelly", "metal", "sand", "foam", "plasticine")
"""Material models, in the order of the kernels' integer codes."""

_DEFAULT_YIELD = {"metal": 1.0e6, "plasticine": 5.0e3, "foam": 2.0e3}
"""Yield stress (Pa) when a scene names a yielding material but gives none (real2sim's table values)."""


@dataclass(frozen=True)
class Material:
    """One MPM material; ``yield_stress`` matters for metal, plasticine and foam, ``friction_angle`` for
    sand, ``viscosity`` for foam (its rate-dependent yield)."""

    model: str = "plasticine"
    youngs_modulus: float = 2.0e5
    """Pa."""
    poissons_ratio: float = 0.3
    density: float = 1200.0
    """kg/m^3."""
    yield_stress: float = 5.0e3
    """Pa (von Mises, on the Hencky strain's deviatoric part: ``|dev eps| <= yield_stress / (2 mu)``)."""
    friction_angle: float = 30.0
    """Degrees (Drucker-Prager)."""
    viscosity: float = 10.0
    """Pa s (foam's Perzyna relaxation)."""

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise SceneError(f"MPM material model must be one of {MODELS}, got {self.model!r}")
        checks = {
            "youngs_modulus": self.youngs_modulus > 0,
            "poissons_ratio": -1.0 < self.poissons_ratio < 0.5,
            "density": self.density > 0,
            "yield_stress": self.yield_stress > 0,
            "friction_angle": 0.0 <= self.friction_angle < 90.0,
            "viscosity": self.viscosity >= 0,
        }
        for name, ok in checks.items():
            if not (ok and math.isfinite(getattr(self, name))):
                raise SceneError(f"MPM material {self.model}: {name} out of range: {getattr(self, name)!r}")

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> Material:
        """From a scene object's ``material`` (``model``, ``youngs_modulus``, ``poissons_ratio``, ``density``,
        ``friction_angle``, ``yield_stress``, ``viscosity``); missing values take the model's defaults."""
        known = {
            "model",
            "youngs_modulus",
            "poissons_ratio",
            "density",
            "friction_angle",
            "yield_stress",
            "viscosity",
        }
        unknown = set(raw) - known
        if unknown:
            raise SceneError(
                f"MPM material: unknown fields {sorted(unknown)}; expected some of {sorted(known)}"
            )
        model = str(raw.get("model", "plasticine"))
        values: dict[str, Any] = {"model": model}
        if model in _DEFAULT_YIELD:
            values["yield_stress"] = _DEFAULT_YIELD[model]
        for key in known - {"model"}:
            if raw.get(key) is not None:
                try:
                    values[key] = float(raw[key])
                except (TypeError, ValueError):
                    raise SceneError(f"MPM material: {key} must be a number, got {raw[key]!r}") from None
        return cls(**values)

    @property
    def code(self) -> int:
        return MODELS.index(self.model)

    def lame(self) -> tuple[float, float]:
        """Lame parameters (mu, lambda), Pa."""
        e, nu = self.youngs_modulus, self.poissons_ratio
        return e / (2.0 * (1.0 + nu)), e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))

    def dp_alpha(self) -> float:
        """Drucker-Prager cone coefficient of the friction angle (Klar et al. 2016)."""
        s = math.sin(math.radians(self.friction_angle))
        return math.sqrt(2.0 / 3.0) * 2.0 * s / (3.0 - s)

    def wave_speed(self) -> float:
        """P-wave speed sqrt((lambda + 2 mu) / rho), m/s: what bounds an explicit step."""
        mu, lam = self.lame()
        return math.sqrt((lam + 2.0 * mu) / self.density)
