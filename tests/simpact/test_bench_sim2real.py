"""Sim-to-real without hardware: the stand-in real world and the agreement benchmark (one tiny run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from robot.sim2real import PerturbedWorld, RealityGap, draw_perturbation, perturb_scene
from simpact.bench.episodes import RUNS, BenchError
from simpact.bench.sim2real import format_table, run_sim2real
from simpact.tasks import load_task
from solvers.mujoco.world import MujocoWorld

TASK = "pivoting"  # the quickest for the planner to solve
SAME_PHYSICS = {"timestep": 0.002, "iterations": 50}  # the planner world's PhysicsOptions


def test_perturbation_is_seeded_bounded_and_spares_fixtures_and_markers() -> None:
    task = load_task("avoid_obstacle")
    scene = task.scene(1)
    gap = RealityGap()
    p = draw_perturbation(scene, gap, task.name, 1)
    assert p == draw_perturbation(scene, gap, task.name, 1)
    assert p != draw_perturbation(scene, gap, task.name, 2)
    movable = {o.name for o in scene.objects if not o.fixed and o.collides}
    assert set(p.mass) == movable and movable  # the region marker is not moved
    for factor in [*p.mass.values(), *p.friction.values(), *p.kp, *p.kv, p.table_friction]:
        assert 1 - gap.mass <= factor <= 1 + gap.mass and factor != 1.0
    real = perturb_scene(scene, p)
    for before, after in zip(scene.objects, real.objects):
        if before.name in movable:
            shift = np.subtract(after.position, before.position)
            assert np.all(np.abs(shift[:2]) <= gap.position_m) and shift[2] == 0.0
            assert after.mass == pytest.approx(before.mass * p.mass[before.name])
        else:
            assert after == before


def test_zero_gap_with_the_same_physics_is_the_planners_world_bit_for_bit() -> None:
    task = load_task(TASK)
    scene = task.scene(2)
    planner = MujocoWorld(scene)
    gap = RealityGap(**SAME_PHYSICS).scaled(0.0)
    real = PerturbedWorld(scene, draw_perturbation(scene, gap, task.name, 2))
    assert np.array_equal(planner.initial_snapshot, real.initial_snapshot)
    plan = task.reference_plan(scene, planner.start_pose(), 2)
    a, b = planner.rollout(plan, tail_s=task.tail_s), real.rollout(plan, tail_s=task.tail_s)
    assert a.trace is not None and b.trace is not None
    assert np.array_equal(a.trace.qpos, b.trace.qpos)


def test_perturbed_world_has_the_drawn_physics() -> None:
    task = load_task(TASK)
    scene = task.scene(1)
    p = draw_perturbation(scene, RealityGap(), task.name, 1)
    real = PerturbedWorld(scene, p)
    nominal = MujocoWorld(scene)
    assert real.model.opt.timestep == 0.001 and real.model.opt.iterations == 100
    assert real.substeps == 10
    arm = nominal.model.actuator("fr3_joint1").id
    assert real.model.actuator_gainprm[arm, 0] == pytest.approx(
        nominal.model.actuator_gainprm[arm, 0] * p.kp[0]
    )
    assert real.model.actuator_biasprm[arm, 2] == pytest.approx(
        nominal.model.actuator_biasprm[arm, 2] * p.kv[0]
    )
    box = real.model.body("box").id
    assert real.model.body_mass[box] == pytest.approx(nominal.model.body_mass[box] * p.mass["box"])


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("sim2real")
    return out, run_sim2real([TASK], [1], out, budget_s=15.0, rejected=2)


def test_tiny_run_reports_agreement_and_a_consistent_confusion_matrix(
    tiny_run: tuple[Path, dict[str, Any]],
) -> None:
    out, result = tiny_run
    assert json.loads((out / "result.json").read_text()) == result
    (record,) = [json.loads(line) for line in (out / RUNS).read_text().splitlines()]
    kinds = [p["kind"] for p in record["plans"]]
    assert kinds[0] == "reference" and kinds.count("rejected") == 2
    assert all(not p["predicted"]["success"] for p in record["plans"] if p["kind"] == "rejected")
    summary = result["tasks"][TASK]
    c = summary["confusion"]
    cells = [c[p][e] for p in c for e in c[p]]
    assert sum(cells) == summary["plans"] == len(record["plans"])
    agree = c["predicted_success"]["executed_success"] + c["predicted_failure"]["executed_failure"]
    assert summary["agree"] == agree and summary["agreement"] == pytest.approx(
        agree / summary["plans"], abs=1e-4
    )
    assert result["overall"]["plans"] == summary["plans"]
    table = format_table(result)
    assert TASK in table and "P+E+" in table and "89%" in table


def test_a_rerun_resumes_and_another_config_reruns(tiny_run: tuple[Path, dict[str, Any]]) -> None:
    out, first = tiny_run
    again = run_sim2real([TASK], [1], out, budget_s=15.0, rejected=2)
    assert again["resumed"] == 1 and again["ignored"] == 0 and again["tasks"] == first["tasks"]
    other = run_sim2real([TASK], [1], out, budget_s=15.0, rejected=1)
    assert other["resumed"] == 0 and other["ignored"] == 1
    (record,) = [json.loads(line) for line in (out / RUNS).read_text().splitlines()][1:]
    assert [p["kind"] for p in record["plans"]].count("rejected") <= 1  # the new config's episode
    back = run_sim2real([TASK], [1], out, budget_s=15.0, rejected=2)
    assert back["resumed"] == 1 and back["ignored"] == 1 and back["tasks"] == first["tasks"]
    with pytest.raises(BenchError, match="reality gap"):
        run_sim2real([TASK], [1], out, gap={"mass": 1.5})
