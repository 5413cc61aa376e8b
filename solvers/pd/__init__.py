"""Projective dynamics in PyTorch (Bouaziz et al. 2014), batched over candidate plans: a rope as a chain of
particles (:mod:`solvers.pd.rope`) and a cloth as a grid of them (:mod:`solvers.pd.cloth`), each with
stretch and bending constraints. Both modules import torch: :func:`pd_solver` imports the one a scene
object needs when it is called."""

from __future__ import annotations

from typing import TYPE_CHECKING

from simpact.core.scene import Scene, SceneObject

if TYPE_CHECKING:
    from solvers.deformable import DeformableSolver

__all__ = ["is_sheet", "pd_solver"]


def is_sheet(obj: SceneObject) -> bool:
    """Whether a ``pd`` object is a cloth: its material says ``model: cloth``, or it is a box whose thickness
    (z) is under a fifth of its smaller side. Anything else is a rope."""
    model = dict(obj.material).get("model")
    if model is not None:
        return str(model) == "cloth"
    return obj.shape == "box" and obj.size[2] < 0.2 * min(obj.size[0], obj.size[1])


def pd_solver(obj: SceneObject, scene: Scene) -> DeformableSolver:
    """The batch-1 projective-dynamics solver of a ``pd`` object: a cloth for a sheet, else a rope."""
    if is_sheet(obj):
        from solvers.pd.cloth import cloth_solver

        return cloth_solver(obj, scene)
    from solvers.pd.rope import rope_solver

    return rope_solver(obj, scene)
