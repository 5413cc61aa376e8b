"""The projective-dynamics rope: the shape of a hanging rope, friction, grasping, determinism and exact
snapshots (solvers.pd.rope, solvers.deformable)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

pytest.importorskip("torch", reason="the PD rope needs torch (pip install -e '.[deformable]')")

from solvers.deformable import Colliders, Grip  # noqa: E402
from solvers.pd.rope import RopeParams, RopeSolver  # noqa: E402, TID253  (after the torch check)

DT = 0.01


def _hanging(segments: int = 40, length: float = 0.6, span: float = 0.45) -> RopeSolver:
    """A rope pinned at both ends ``span`` apart at z = 1 m, started as a V of its own length."""
    s = np.linspace(0.0, 1.0, segments + 1)
    sag = np.sqrt((length / 2) ** 2 - (span / 2) ** 2)
    points = np.stack([-span / 2 + span * s, np.zeros_like(s), 1.0 - sag * (1 - np.abs(2 * s - 1))], axis=1)
    params = RopeParams(
        length=length,
        radius=0.005,
        mass=0.06,
        segments=segments,
        stretch_stiffness=200.0,
        bending_stiffness=0.0,
        damping=5.0,
    )
    return RopeSolver("rope", params, points, pinned=(0, segments))


def _flat(**changes: float) -> RopeSolver:
    params = RopeParams(length=0.3, segments=30, **changes)  # type: ignore[arg-type]
    points = np.c_[np.full(31, 0.5), np.linspace(-0.15, 0.15, 31), np.full(31, params.radius)]
    return RopeSolver("rope", params, points)


def _grip(centre: np.ndarray, opening: float, velocity: np.ndarray | None = None) -> Colliders:
    """Colliders with only a grip frame (finger axis x) at ``centre`` (pads far from nothing else)."""
    grip = Grip(
        centre=np.asarray(centre, dtype=float)[None],
        rotation=np.eye(3)[None],
        half=np.array([0.0085, 0.0085]),
        opening=np.array([opening]),
        velocity=np.zeros((1, 3)) if velocity is None else np.asarray(velocity, dtype=float)[None],
        angular_velocity=np.zeros((1, 3)),
    )
    empty = np.zeros((1, 0, 3))
    return Colliders(
        0.0, 0.5, empty, np.zeros((1, 0, 3, 3)), np.zeros((0, 3)), empty, empty, np.zeros(0), (), grip
    )


def test_a_rope_hung_from_both_ends_takes_a_catenary() -> None:
    rope = _hanging()
    for _ in range(400):
        rope.step(DT)
    x = rope.positions()[0]
    assert np.abs(rope.velocities()).max() < 1e-4, "the rope comes to rest"
    length = float(np.linalg.norm(np.diff(x, axis=0), axis=1).sum())  # stretched by its weight
    assert 0.6 < length < 0.61
    span = 0.45
    a = brentq(lambda a: 2 * a * np.sinh(span / (2 * a)) - length, 0.01, 100.0)
    z = 1.0 + a * (np.cosh(x[:, 0] / a) - np.cosh(span / (2 * a)))
    assert np.abs(x[:, 2] - z).max() < 0.003, np.abs(x[:, 2] - z).max()
    # and the test can fail: a parabola of the same sag is off by more than the tolerance
    sag = 1.0 - z.min()
    parabola = 1.0 - sag * (1 - (2 * x[:, 0] / span) ** 2)
    assert np.abs(x[:, 2] - parabola).max() > 0.003


def test_a_sliding_rope_stops_as_coulomb_friction_says() -> None:
    rope = _flat(friction=0.5)
    rope._v[:] = 0.0
    for _ in range(5):
        rope.step(DT)
    import torch

    rope._v = torch.tensor([0.5, 0.0, 0.0], dtype=torch.float64).expand(1, 31, 3).clone()
    rope._asleep[:] = False
    stopped = None
    for i in range(40):
        rope.step(DT)
        if stopped is None and np.abs(rope.velocities()).max() == 0.0:
            stopped = (i + 1) * DT
    assert stopped is not None and 0.08 <= stopped <= 0.15, stopped  # v / (mu g) = 0.10 s


def test_particles_between_closing_pads_follow_them_and_are_released() -> None:
    rope = _flat()
    middle = rope.positions()[0, 15]
    rope.step(DT, _grip(middle, 0.05))
    assert not rope.held().any(), "an open grip holds nothing"
    rope.step(DT, _grip(middle, 0.01))
    held = rope.held()[0]
    assert held[15] and held.sum() == 3, held  # the pads' 1.7 cm span (+ radius) over 1 cm spacing
    for k in range(1, 11):
        rope.step(DT, _grip(middle + [0.01 * k, 0.0, 0.02], 0.01))
    x = rope.positions()[0]
    assert x[15] == pytest.approx(middle + [0.1, 0.0, 0.02], abs=1e-12)
    assert x[0, 0] < x[15, 0] - 0.02, "the ends trail behind"
    rope.step(DT, _grip(middle + [0.1, 0.0, 0.02], 0.05))
    assert not rope.held().any()
    for _ in range(30):
        rope.step(DT)
    assert rope.positions()[0, :, 2].max() == pytest.approx(rope.radius, abs=1e-9), (
        "it falls back to the table"
    )


def _drive(rope: RopeSolver, steps: int) -> None:
    middle = np.array([0.5, 0.0, 0.0075])
    for k in range(steps):
        rope.step(DT, _grip(middle + [0.004 * k, 0.0, 0.01], 0.01, velocity=[0.4, 0.0, 0.0]))


def test_stepping_is_deterministic_and_snapshots_are_exact() -> None:
    a, b = _flat(), _flat()
    _drive(a, 20)
    _drive(b, 20)
    assert np.array_equal(a.positions(), b.positions())
    snap = a.snapshot()
    _drive(a, 15)
    after = a.positions()
    a.restore(snap)
    _drive(a, 15)
    assert np.array_equal(a.positions(), after)
    assert not np.array_equal(after, b.positions()), "the snapshot is not changed by later steps"


def _stack(members: list[Colliders]) -> Colliders:
    """One batch of colliders from batch-1 ones."""
    first = members[0]

    def cat(obj: object, name: str) -> np.ndarray:
        return np.concatenate([getattr(getattr(m, obj) if obj else m, name) for m in members])

    grip = Grip(
        *[
            first.grip.half if f == "half" else cat("grip", f)
            for f in ("centre", "rotation", "half", "opening", "velocity", "angular_velocity")
        ]
    )
    return Colliders(
        first.table_z,
        first.table_friction,
        cat("", "centre"),
        cat("", "rotation"),
        first.half,
        cat("", "velocity"),
        cat("", "angular_velocity"),
        first.friction,
        first.owner,
        grip,
    )


@pytest.mark.parametrize(("batch_size", "spread"), [(3, 0.0), (2, 0.02), (5, 0.02), (64, 0.0)])
def test_a_batch_steps_each_member_as_a_single_rope_would(batch_size: int, spread: float) -> None:
    """Every member as a single rope would, bit for bit, whether the members hold the same particles or
    (``spread``: grips ``spread`` m apart along the rope) different ones."""
    single = _flat()
    batch = _flat().replicate(batch_size)
    last = batch_size - 1
    for k in range(15):
        grips = [_grip([0.5 + 0.004 * k * m, spread * m, 0.01], 0.01) for m in range(batch_size)]
        batch.step(DT, _stack(grips))
        single.step(DT, grips[last])
    assert np.array_equal(batch.positions()[last], single.positions()[0])
    assert not np.array_equal(batch.positions()[0], batch.positions()[last])
    if spread:
        assert not np.array_equal(batch.held()[0], batch.held()[last]), "the members hold different particles"


def test_the_rope_step_runs_compiled_by_torchscript() -> None:
    """``scripted`` falls back to plain Python when TorchScript cannot compile a function, which only shows
    as a slower rope: each function the step compiles must compile."""
    import torch

    from solvers.pd.contact import _frictions, _push, scripted  # noqa: TID253
    from solvers.pd.iterations import compiled_settle, compiled_solve  # noqa: TID253

    for fn in (compiled_solve(), compiled_settle(), scripted(_push), scripted(_frictions)):
        assert isinstance(fn, torch.jit.ScriptFunction), fn
