"""The planner's own context for a VLM: the history of every proposal (for the Optimize prompt) and rendered
images; scenes, states and rollouts are described by :mod:`simpact.vlm.context`.

- :func:`history_context`: every proposal so far, for the Optimize prompt.
- :func:`initial_image` / :func:`keyframes`: rendered images for VLMs that take them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from simpact.core.rollout import Rollout
from simpact.planner.records import Proposal
from simpact.vlm.context import rollout_context
from solvers.world import World

__all__ = ["history_context", "initial_image", "keyframes"]


def history_context(proposals: Sequence[Proposal], *, scores: bool = True) -> list[dict[str, Any]]:
    """Every proposal so far (its source, steps, final state, the task check's score unless not ``scores``,
    flags), for the Optimize prompt."""
    return [
        rollout_context(
            p.rollout,
            score=p.score if scores else None,
            flags=[str(f) for f in p.notes.get("flags", ())],
            label=f"{i} ({p.source})",
        )
        for i, p in enumerate(proposals)
    ]


def initial_image(world: World) -> np.ndarray:
    """RGB (H, W, 3) uint8 of the world's initial snapshot from its camera."""
    return np.asarray(world.render().rgb)


def keyframes(world: World, rollout: Rollout) -> list[np.ndarray]:
    """RGB images (H, W, 3) uint8 of ``rollout`` at its final state (needs a trace); empty without one."""
    if rollout.trace is None:
        return []
    return [np.asarray(world.render_trace(rollout.trace, -1).rgb)]
