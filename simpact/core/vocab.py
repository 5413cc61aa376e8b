"""Each vocabulary of the project, defined once: object kinds, parameter sources, planners, VLM back-ends."""

from __future__ import annotations

__all__ = [
    "BENCH_PLANNERS",
    "EXECUTORS",
    "OBJECT_KINDS",
    "OFFLINE_METHODS",
    "PARAMETER_SOURCES",
    "SKELETON_METHODS",
    "VLM_BACKENDS",
    "VLM_CHOICES",
]

OBJECT_KINDS = ("rigid", "pd", "mpm")
"""Solvers an object can be simulated with: MuJoCo (rigid), projective dynamics (pd), MPM (mpm)."""
PARAMETER_SOURCES = ("vlm", "material_table", "task", "user", "default")
"""Where a physical parameter came from."""
OFFLINE_METHODS = ("tree", "skeleton", "cem", "template", "gaussian")
"""VLM-free planners (``simpact plan --vlm none --method ...``); the first is the default. ``tree``: a tree
search over object-centric primitives with no skeleton; ``skeleton``: CEM over the task's hand-written
skeleton (``cem`` is its former name, the same planner); ``template`` and ``gaussian``: skeleton ablations."""
SKELETON_METHODS = OFFLINE_METHODS[1:]
"""The VLM-free planners that need a task's ``skeleton:``."""
VLM_BACKENDS = ("gemini", "openai", "replay")
"""VLM back-ends registered by name."""
VLM_CHOICES = ("none", *VLM_BACKENDS)
"""``--vlm`` values: ``none`` plans offline."""
BENCH_PLANNERS = ("reference", *OFFLINE_METHODS, "vlm")
"""``simpact bench tasks --planner`` values."""
EXECUTORS = ("local", "ray")
"""Where benchmark episodes run: a local process pool, or a Ray cluster."""
