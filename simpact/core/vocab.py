"""Each vocabulary of the project, defined once: object kinds, parameter sources, planners, VLM back-ends."""

from __future__ import annotations

__all__ = [
    "BENCH_PLANNERS",
    "EXECUTORS",
    "OBJECT_KINDS",
    "OFFLINE_METHODS",
    "PARAMETER_SOURCES",
    "VLM_BACKENDS",
    "VLM_CHOICES",
]

OBJECT_KINDS = ("rigid", "pd", "mpm")
"""Solvers an object can be simulated with: MuJoCo (rigid), projective dynamics (pd), MPM (mpm)."""
PARAMETER_SOURCES = ("vlm", "material_table", "task", "user", "default")
"""Where a physical parameter came from."""
OFFLINE_METHODS = ("cem", "template", "gaussian")
"""VLM-free planners (``simpact plan --vlm none --method ...``); the first is the default."""
VLM_BACKENDS = ("gemini", "openai", "replay")
"""VLM back-ends registered by name."""
VLM_CHOICES = ("none", *VLM_BACKENDS)
"""``--vlm`` values: ``none`` plans offline."""
BENCH_PLANNERS = ("reference", *OFFLINE_METHODS, "vlm")
"""``simpact bench tasks --planner`` values."""
EXECUTORS = ("local", "ray")
"""Where benchmark episodes run: a local process pool, or a Ray cluster."""
