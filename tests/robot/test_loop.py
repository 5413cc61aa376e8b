"""The closed loop (robot.loop) in the simulated stand-in world (robot.simworld): replanning until the judge
says success, dry runs, a failed stage saved and named, and the judge's view of real2sim's boxes; and on a
Franka (franky-sim) with recorded bundles as the camera: a dry run and a run that moves."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import robot.loop as loop
from robot.camera import CameraError
from robot.judge import align_orientation, observed_rollout
from robot.loop import run_loop
from robot.loop_records import ClosedLoopConfig, InstructionTask
from robot.simworld import SimWorld
from simpact.cli import main
from simpact.core.actions import Plan
from simpact.core.rotations import quat_about_z, quat_mul, tilt_angle
from simpact.tasks import load_task
from tests.vlm_doubles import ScriptedVLM

TASK = "non_toppling_push"


def read(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def still_world() -> Iterator[SimWorld]:
    """A stand-in world for runs that never move the robot."""
    yield SimWorld.create(load_task(TASK), seed=0)


# --- the judge's view of real2sim's boxes -------------------------------------------------------------------


def test_a_box_turned_a_quarter_with_swapped_extents_is_the_same_box() -> None:
    before_q = quat_about_z(0.1)
    after_q = quat_about_z(0.1 + math.pi / 2)  # real2sim may name the box's axes the other way round
    q = align_orientation(before_q, np.array([0.07, 0.065, 0.2]), after_q, np.array([0.065, 0.07, 0.2]))
    assert abs(float(np.dot(q, before_q))) == pytest.approx(1.0, abs=1e-9)


def test_a_carton_lying_down_is_tilted_even_though_its_box_is_upright() -> None:
    upright = np.array([1.0, 0.0, 0.0, 0.0])
    q = align_orientation(upright, np.array([0.07, 0.07, 0.2]), upright, np.array([0.2, 0.07, 0.07]))
    assert math.degrees(float(tilt_angle(q))) == pytest.approx(90.0, abs=1e-6)


def test_the_task_check_reads_the_observed_outcome() -> None:
    task = load_task(TASK)
    before = task.scene(0)
    carton = next(o for o in before.objects if o.name == "carton")
    plan = Plan.from_actions([{"type": "LIFT", "dz": 0.01}])
    robot = (np.array([0.36, 0.0, 0.25]), np.array([0.0, 0.7071, 0.7071, 0.0]), 0.0)

    def judged(moved: Any) -> Any:
        after = replace(before, objects=tuple(moved if o.name == "carton" else o for o in before.objects))
        return task.evaluate(observed_rollout(plan, before, after, robot, robot, 12.0), before, 0)

    on_line = judged(carton.moved(position=(0.705, 0.0, 0.1)))
    assert on_line.success and on_line.details["at:carton.error_m"] == pytest.approx(0.005)
    short = judged(carton.moved(position=(0.62, 0.0, 0.1)))
    assert not short.success and short.details["at:carton.error_m"] == pytest.approx(0.08)
    lying = judged(replace(carton.moved(position=(0.70, 0.0, 0.035)), size=(0.2, 0.07, 0.07)))
    assert not lying.success and lying.details["upright:carton.tilt_deg"] == pytest.approx(90.0)


# --- the loop -----------------------------------------------------------------------------------------------


def test_a_failed_stage_is_saved_named_and_ends_the_loop(tmp_path: Path, still_world: SimWorld) -> None:
    class Broken:
        def capture(self) -> Any:
            raise CameraError("no frames within 5000 ms")

        def close(self) -> None:
            pass

    config = ClosedLoopConfig(planner="reference")
    result = run_loop(Broken(), still_world.robot, still_world.task, tmp_path, config)
    assert (result.stopped, result.failed_stage, result.robot_stopped) == ("failed", "capture", False)
    saved = read(tmp_path / "result.json")
    assert saved["failed_stage"] == "capture" and saved["success"] is None
    assert saved["attempts"][0]["error"] == {"stage": "capture", "message": "no frames within 5000 ms"}
    assert "capture" in saved["attempts"][0]["timings_s"]
    assert not still_world.robot.connected


def test_a_dry_run_plans_and_validates_but_never_moves(tmp_path: Path, still_world: SimWorld) -> None:
    t0 = still_world.world.data.time
    result = run_loop(
        still_world.camera,
        still_world.robot,
        still_world.task,
        tmp_path,
        ClosedLoopConfig(planner="reference"),
        confirm=lambda validation: "dry run (test)",
    )
    assert (result.stopped, result.dry_run, result.success) == ("dry run", "dry run (test)", None)
    attempt = tmp_path / "attempt_1"
    assert (attempt / "frame_before" / "rgb.png").is_file()
    assert (attempt / "real2sim" / "scene.json").is_file()
    assert (attempt / "plan.json").is_file() and (attempt / "planning" / "result.json").is_file()
    execution = read(attempt / "execution" / "result.json")
    assert execution["executed"] is False and execution["validation"]["ok"] is True
    assert execution["dry_run"] == "dry run (test)"
    assert not (attempt / "frame_after").exists()
    assert still_world.world.data.time == t0  # nothing was simulated: nothing moved


def test_sim_run_replans_from_the_after_frame_until_the_judge_says_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attempt 1 executes a push cut to half its length: the carton stops short, the judge (the task check on
    real2sim's after-frame) says failure and agrees with the stand-in world; attempt 2 plans from that frame
    and finishes the push."""
    from simpact.planner.records import PlanResult, Proposal

    plan_for_real = loop._plan
    calls: list[int] = []

    def short_first_push(task: Any, scene: Any, world: Any, vlm: Any, config: Any, say: Any) -> Any:
        calls.append(1)
        planned = plan_for_real(task, scene, world, vlm, config, say)
        if len(calls) > 1:
            return planned
        raw = planned.chosen.plan.to_dict()
        push = next(a for a in raw["actions"] if a["type"] == "PUSH")
        push["dx"] *= 0.5
        short = Plan.from_dict(raw)
        rollout = world.rollout(short, tail_s=task.tail_s)
        evaluation = task.evaluate(rollout, scene, config.seed)
        proposal = Proposal(rollout.plan, rollout, evaluation, 0, "short push")
        return PlanResult(task.name, config.seed, [proposal], 0, 0, 0.0, None, 1, method="short push")

    monkeypatch.setattr(loop, "_plan", short_first_push)
    out = tmp_path / "run"
    status = main(["robot", "run", TASK, "--sim", "--yes", "--planner", "reference", "--out", str(out)])
    assert status == 0
    result = read(out / "result.json")
    assert (result["success"], result["stopped"], result["n_attempts"]) == (True, "success", 2)
    first, second = result["attempts"]
    assert (first["success"], first["ground_truth_success"]) == (False, False)
    assert (second["success"], second["ground_truth_success"]) == (True, True)
    assert second["real2sim_from"] == "attempt_1/real2sim_after"
    stages = ["capture", "real2sim", "plan", "validate", "execute", "retreat", "capture_after"]
    stages += ["real2sim_after", "judge"]
    for attempt in (first, second):
        assert attempt["stages_done"] == stages and list(attempt["timings_s"]) == stages
    for n in (1, 2):
        adir = out / f"attempt_{n}"
        for name in ("frame_before", "frame_after"):
            assert (adir / name / "depth.npy").is_file()
        for name in ("real2sim", "real2sim_after"):
            assert (adir / name / "scene.json").is_file()
        assert (adir / "plan.json").is_file()
        execution = read(adir / "execution" / "result.json")
        assert execution["executed"] is True and execution["error_max_m"] < 0.005
    short = read(out / "attempt_1" / "judgement.json")
    assert short["judge"] == "task" and short["success"] is False
    assert short["task_check"]["details"]["at:carton.error_m"] > 0.05  # stopped well short of the line
    assert short["ground_truth"]["details"]["at:carton.error_m"] == pytest.approx(
        short["task_check"]["details"]["at:carton.error_m"], abs=0.01
    )
    done = read(out / "attempt_2" / "judgement.json")
    assert done["success"] is True and done["task_check"]["details"]["at:carton.error_m"] <= 0.02
    # the frame after attempt 1 is the frame attempt 2 started from
    assert np.array_equal(
        np.load(out / "attempt_1" / "frame_after" / "depth.npy"),
        np.load(out / "attempt_2" / "frame_before" / "depth.npy"),
    )


def test_a_franka_dry_run_plans_from_the_task_start_without_moving(
    tmp_path: Path, still_world: SimWorld, fresh_franky_sim: Any
) -> None:
    """--host: the franky driver and recorded bundles as the camera; the robot (at franky-sim's home) stays
    put, and the plan starts at the task's robot start, where it would go once confirmed. (A server of the
    test's own: a live one keeps a core busy.)"""
    from robot.franka import FrankaRobot
    from simpact.core.frame import write_frame_bundle

    bundle = write_frame_bundle(still_world.camera.capture(), tmp_path / "bundle")
    with FrankaRobot(fresh_franky_sim.host, realtime=False) as franka:
        home, _ = franka.tcp_pose()
    out = tmp_path / "run"
    argv = ["robot", "run", TASK, "--host", fresh_franky_sim.host, "--no-realtime", "--frames", str(bundle)]
    assert main([*argv, "--planner", "reference", "--dry-run", "--out", str(out)]) == 0
    result = read(out / "result.json")
    assert (result["stopped"], result["dry_run"]) == ("dry run", "dry run (--dry-run)")
    assert result["mode"] == "robot" and result["camera"] == "bundles"
    assert result["initial_pose"]["position"] == pytest.approx(home.tolist(), abs=1e-4)
    plan = read(out / "attempt_1" / "plan.json")
    assert plan["start_pose"]["position"] == pytest.approx([0.36, 0.0, 0.25], abs=1e-4)
    with FrankaRobot(fresh_franky_sim.host, realtime=False) as franka:
        assert np.linalg.norm(franka.tcp_pose()[0] - home) < 1e-4


@pytest.mark.slow
def test_a_franka_run_moves_the_robot_through_every_stage(tmp_path: Path, fresh_franky_sim: Any) -> None:
    """--host for real: the Franka (franky-sim) goes to the task's start, executes the reference plan and
    retreats there; the camera replays rendered frames of the task's scene. franky-sim simulates no carton,
    so the after-frame is the before-frame and the judge's verdict is failure (recorded, not a failed stage).
    Plans and transits run at 0.5 m/s to keep it short, as in test_franka_sim.py."""
    from robot.camera import BundlePlayer
    from robot.franka import FrankaRobot
    from robot.safety import HOME_TCP_QUATERNION, SafetyLimits
    from simpact.core.frame import write_frame_bundle
    from solvers.mujoco.playback import render_frame
    from solvers.mujoco.world import MujocoWorld

    task = load_task(TASK)
    frame = render_frame(MujocoWorld(task.scene(0)))
    bundles = [write_frame_bundle(frame, tmp_path / "frames" / name) for name in ("0_before", "1_after")]
    camera = BundlePlayer(bundles)
    franka = FrankaRobot(fresh_franky_sim.host, SafetyLimits(max_speed=0.5), realtime=False)
    config = ClosedLoopConfig(attempts=1, planner="reference", speed=0.5, transit_speed=0.5, settle_s=0.0)
    out = tmp_path / "run"
    result = run_loop(camera, franka, task, out, config)
    assert not franka.connected and camera.index == len(camera) == 2

    saved = read(out / "result.json")
    assert (saved["stopped"], saved["failed_stage"], saved["robot_stopped"]) == (
        "attempts exhausted",
        None,
        False,
    )
    assert (saved["success"], saved["dry_run"], saved["n_attempts"]) == (False, None, 1)
    (attempt,) = saved["attempts"]
    stages = ["capture", "real2sim", "plan", "validate", "execute", "retreat", "capture_after"]
    stages += ["real2sim_after", "judge"]
    assert attempt["stages_done"] == stages and attempt["failed_stage"] is None and attempt["error"] is None
    assert attempt["success"] is False and result.success is False
    # franky-sim starts at the planner's home, not at the task's start: the robot went there first
    assert "transit_to_start" in attempt

    adir = out / "attempt_1"
    for name in ("frame_before", "frame_after"):
        assert (adir / name / "rgb.png").is_file() and (adir / name / "depth.npy").is_file()
    for name in ("real2sim", "real2sim_after"):
        assert (adir / name / "scene.json").is_file()
    assert (adir / "plan.json").is_file() and (adir / "planning" / "result.json").is_file()
    execution = read(adir / "execution" / "result.json")
    assert execution["executed"] is True and execution["validation"]["ok"] is True
    errors = execution["waypoint_errors_m"]
    assert len(errors) >= len(read(adir / "plan.json")["actions"])
    assert max(errors) <= 0.005, errors

    judgement = read(adir / "judgement.json")
    assert (judgement["judge"], judgement["success"]) == ("task", False)
    assert judgement["task_check"]["success"] is False
    assert "ground_truth" not in judgement  # no oracle on a robot
    before, after = judgement["observed"]["before"], judgement["observed"]["after"]
    assert before["carton"]["position"] == pytest.approx(after["carton"]["position"], abs=1e-6)

    # the retreat left the robot at the capture pose, the task's robot start
    capture = saved["capture_pose"]
    begin = task.nominal_scene.robot
    assert capture["position"] == pytest.approx(list(begin.position), abs=1e-6)
    assert attempt["retreat_path"][-1] == pytest.approx(capture["position"], abs=1e-4)
    with FrankaRobot(fresh_franky_sim.host, realtime=False) as franka:
        position, quaternion = franka.tcp_pose()
        width = franka.gripper_width()
    assert np.linalg.norm(position - np.asarray(capture["position"])) < 0.005, position
    expected = quat_mul(quat_about_z(begin.yaw), np.asarray(HOME_TCP_QUATERNION))
    assert abs(float(np.dot(quaternion, expected))) > math.cos(math.radians(1.0) / 2)
    assert width == pytest.approx(capture["gripper_width"], abs=0.003)


class PushingVLM(ScriptedVLM):
    """Answers each request of the push task the way a careful VLM would, reading the numbers from the
    prompt: which cluster is which object, a push plan from the scene context, and verdicts from the
    carton's final x against the blue box's."""

    def __init__(self) -> None:
        super().__init__(default=self.answer)

    @staticmethod
    def _json_after(text: str, key: str) -> Any:
        return json.JSONDecoder().raw_decode(text, text.index(key) + len(key))[0]

    def answer(self, parts: Any, role: Any) -> Any:
        text = "\n".join(p for p in parts if isinstance(p, str))
        answer: Any = {}
        if role.startswith("assign_labels"):
            block = text.split("## Clusters")[1].split("## Output")[0]
            clusters = json.loads(block[block.index("\n[") :].strip())
            carton = max(clusters, key=lambda c: c["height_m"])
            blue = max((c for c in clusters if c is not carton), key=lambda c: c["colour_rgb"][2])
            answer = {
                "assignments": [
                    {"label": "carton", "cluster": carton["index"]},
                    {"label": "blue box", "cluster": blue["index"]},
                ]
            }
        elif role.startswith(("sample", "optimize")):
            start = text.index('{"robot":')
            scene = json.JSONDecoder().raw_decode(text, start)[0]
            ee, carton = scene["robot"]["ee_xyz"], scene["objects"]["carton"]["xyz"]
            line = scene["objects"]["blue_box"]["xyz"][0]
            answer = {
                "description": "push the carton low to the blue box's line",
                "actions": [
                    {"type": "MOVE", "dx": carton[0] - 0.169 - ee[0], "dy": carton[1] - ee[1], "dz": 0.0},
                    {"type": "DESCEND", "dz": ee[2] - 0.02},
                    {"type": "PUSH", "dx": line - carton[0] + 0.03, "dy": 0.0},
                    {"type": "MOVE", "dx": -0.06, "dy": 0.0, "dz": 0.0},
                    {"type": "LIFT", "dz": 0.15},
                ],
            }
        elif role.startswith(("evaluate", "judge")):
            scene = json.JSONDecoder().raw_decode(text, text.index('{"robot":'))[0]
            line = scene["objects"]["blue_box"]["xyz"][0]
            if role.startswith("judge"):
                x = self._json_after(text, '"final":')["carton"]["position"][0]
            else:
                x = self._json_after(text, '"final_state":')["objects"]["carton"]["xyz"][0]
            answer = {
                "reason": f"carton at x = {x:.3f} m, line at {line:.3f} m",
                "success": abs(x - line) <= 0.02,
            }
        return answer


def test_an_instruction_without_a_task_is_planned_and_judged_by_the_vlm(tmp_path: Path) -> None:
    sim = SimWorld.create(load_task(TASK), seed=0)
    vlm = PushingVLM()
    task = InstructionTask("Push the carton until it lines up with the blue box.", ["carton", "blue box"])
    config = ClosedLoopConfig(planner="vlm", judge="vlm", start="current", k=1, k_max=2)
    result = run_loop(sim.camera, sim.robot, task, tmp_path, config, vlm=vlm, oracle=sim)
    assert (result.success, result.stopped, len(result.attempts)) == (True, "success", 1)
    judgement = read(tmp_path / "attempt_1" / "judgement.json")
    assert judgement["judge"] == "vlm" and judgement["vlm"]["success"] is True
    assert "task_check" not in judgement and judgement["ground_truth"]["success"] is True
    assert [e["role"] for e in judgement["vlm"]["exchanges"]] == ["judge"]
    assert {"assign_labels", "physics", "sample/0", "optimize/1", "judge"} <= set(vlm.roles)
    assert (tmp_path / "attempt_1" / "planning" / "prompts").is_dir()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sim"], "give a TASK or --instruction TEXT"),
        ([TASK, "--instruction", "push it", "--sim"], "give a TASK or --instruction TEXT"),
        (["--instruction", "push the carton", "--host", "127.0.0.254"], "it needs a VLM"),
        ([TASK, "--sim", "--frames", "x"], "--frames replaces the camera of a real robot"),
        ([TASK, "--sim", "--planner", "vlm"], "--planner vlm needs a VLM"),
        ([TASK, "--sim", "--attempts", "0"], "attempts must be at least 1"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["robot", "run", *argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_a_rope_task_runs_the_whole_loop_with_the_rope_simulated_and_judged(tmp_path: Path) -> None:
    """shape_rope in the stand-in world: the rope is a PD solver stepped along the stand-in's MuJoCo as the
    robot drags it, real2sim finds it as particles before and after, the planner's world simulates it, and
    the judge's curve distance on the after-frame agrees with the stand-in world's own."""
    out = tmp_path / "rope"
    args = ["shape_rope", "--sim", "--yes", "--planner", "reference", "--attempts", "1", "--out", str(out)]
    status = main(["robot", "run", *args])
    assert status in (0, 1)  # the loop ran to a verdict (the perturbed world may defeat the reference)
    (attempt,) = read(out / "result.json")["attempts"]
    assert attempt["stages_done"][-1] == "judge"
    for name in ("real2sim", "real2sim_after"):
        (rope,) = read(out / "attempt_1" / name / "scene.json")["objects"]
        assert rope["kind"] == "pd" and rope["particle_count"] > 100
    judged = read(out / "attempt_1" / "judgement.json")
    seen = judged["task_check"]["details"]["curve_distance:rope.mean_distance_m"]
    truth = judged["ground_truth"]["details"]["curve_distance:rope.mean_distance_m"]
    assert seen == pytest.approx(truth, abs=0.005)
    assert truth < 0.05  # dragged most of the way into a U (it starts straight, 8 cm from the curve's ends)
