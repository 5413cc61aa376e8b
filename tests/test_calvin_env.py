"""The rebuilt CALVIN scene D (PyBullet) against the data: resets of 20 chains reproduce ``scene_obs``, the
action spaces move the TCP as stated, the cameras see what is there, runs are exact, and a representative
subtask of each family fires on its scripted motion and not on its near miss (all 34:
``python -m simpact.calvin.selfcheck``)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pybullet")

from simpact.calvin.data import load_chains  # noqa: E402
from simpact.calvin.env import BACKEND, CalvinEnv  # noqa: E402
from simpact.calvin.selfcheck import reset_errors, run_subtask, try_task  # noqa: E402
from simpact.core.errors import SimpactError  # noqa: E402
from tests.calvin_data import needs_calvin_data  # noqa: E402

pytestmark = needs_calvin_data


@pytest.fixture(scope="module")
def env():
    with CalvinEnv() as built:
        yield built


@pytest.fixture(scope="module")
def chains():
    return load_chains()


def test_resets_of_20_chains_reproduce_scene_obs_and_robot_obs(env, chains):
    errors = reset_errors(env, chains[:20])
    assert len(errors) == 20
    assert max(e.joints_m for e in errors) < 1e-9 and max(e.lights for e in errors) == 0.0
    # One 1/240 s physics step after the reset (as calvin_env) lets blocks settle onto their support.
    assert max(e.block_pos_m for e in errors) < 5e-4
    assert max(e.block_euler_rad for e in errors) < 1e-2
    env.reset(chains[3].robot_obs, chains[3].scene_obs)
    assert np.allclose(env.robot_obs(), chains[3].robot_obs, atol=1e-5)
    with pytest.raises(SimpactError, match="24"):
        env.reset(chains[0].robot_obs, chains[0].scene_obs[:20])


def test_absolute_and_relative_actions_move_the_tcp(env, chains):
    env.reset(chains[0].robot_obs, chains[0].scene_obs)
    start = env.robot_obs()
    target = start[:3] + np.array([0.05, 0.0, 0.04])
    for _ in range(30):
        env.step(np.r_[target, start[3:6], 1.0])
    assert np.linalg.norm(env.robot_obs()[:3] - target) < 0.005
    here = env.robot_obs()[:3]
    for _ in range(10):
        env.step(np.array([0.0, 0.0, -1.0, 0.0, 0.0, 0.0, -1.0]), relative=True)
    env.settle(20)
    assert env.robot_obs()[2] == pytest.approx(here[2] - 0.2, abs=0.01)  # 10 x 0.02 m down
    assert env.robot_obs()[14] == -1 and env.robot_obs()[6] < 0.01  # closed on nothing


def test_runs_are_exact(chains):
    def run() -> np.ndarray:
        with CalvinEnv() as fresh:
            fresh.reset(chains[7].robot_obs, chains[7].scene_obs)
            for k in range(20):
                fresh.step(np.array([0.3, -0.2, -0.5, 0.0, 0.0, 0.1, 1.0 if k < 10 else -1.0]), relative=True)
            return np.r_[fresh.robot_obs(), fresh.scene_obs()]

    assert np.array_equal(run(), run())


def test_static_camera_sees_each_block_on_the_table_where_it_is(env, chains):
    chain = max(
        chains[:20], key=lambda c: sum(c.initial_state[f"{k}_block"] == "table" for k in env.table.blocks)
    )
    visible = [k for k in env.table.blocks if chain.initial_state[f"{k}_block"] == "table"]
    assert len(visible) >= 2  # blocks in the sliding cabinet can be hidden by its door
    env.reset(chain.robot_obs, chain.scene_obs)
    image = env.render("static")
    assert image.rgb.shape == (200, 200, 3) and image.depth.shape == (200, 200)
    assert image.K[0, 0] == pytest.approx(1143.0, abs=1.0)
    names = env.names()
    for color in visible:
        uid = env.table.blocks[color]
        assert names[uid] == f"block_{color}"
        centre = np.r_[env.snapshot().blocks[color].pos, 1.0]
        cam = image.view @ centre  # OpenGL camera: looks along -z
        u = image.K[0, 0] * cam[0] / -cam[2] + image.K[0, 2]
        v = -image.K[1, 1] * cam[1] / -cam[2] + image.K[1, 2]
        row, col = int(round(v)), int(round(u))
        assert image.body[row, col] == uid, color
        assert image.depth[row, col] == pytest.approx(-cam[2], abs=0.04)  # the block's near face
    frame = env.frame("static")  # the same, as real2sim reads it: OpenCV K and axes, pose in the base frame
    base = np.asarray(env.robot.config.base_position)
    assert sorted(frame.mask_names.values()) == ["block_blue", "block_pink", "block_red"]
    for k, name in frame.mask_names.items():
        if name.removeprefix("block_") not in visible:
            continue
        rows, cols = np.nonzero(frame.masks == k)
        z = frame.depth[rows, cols]
        cam = np.stack(
            [(cols - frame.K[0, 2]) * z / frame.K[0, 0], (rows - frame.K[1, 2]) * z / frame.K[1, 1], z]
        )
        seen = (frame.T_base_cam[:3, :3] @ cam).T + frame.T_base_cam[:3, 3] + base
        true = np.asarray(env.snapshot().blocks[name.removeprefix("block_")].pos)
        assert np.linalg.norm(seen.mean(axis=0)[:2] - true[:2]) < 0.02, name  # visible faces' centroid
    gripper = env.render("gripper")
    assert gripper.rgb.shape == (84, 84, 3) and gripper.depth.min() > 0.0
    with pytest.raises(SimpactError, match="camera"):
        env.render("tactile")


@pytest.mark.slow
@pytest.mark.parametrize(
    "task",
    [
        "rotate_red_block_left",
        "push_blue_block_right",
        "move_slider_left",
        "open_drawer",
        "lift_pink_block_table",
        "stack_block",
        "turn_on_led",
        "turn_off_lightbulb",
        "push_into_drawer",
    ],
)
def test_a_subtask_of_each_family_fires_on_its_scripted_motion_and_not_on_a_near_miss(env, chains, task):
    done = try_task(env, task, True, chains)
    assert done.prefix_ok and done.fired and done.steps <= 360, done
    assert done.backend == BACKEND
    missed = try_task(env, task, False, chains)
    assert not missed.fired, missed


def test_the_pinned_led_reset_bug_breaks_turn_off_led(chains):
    chain = next(c for c in chains if c.sequence[0] == "turn_off_led")
    for bug, fires in ((False, True), (True, False)):
        with CalvinEnv(led_reset_bug=bug) as fresh:
            fresh.reset(chain.robot_obs, chain.scene_obs)
            assert run_subtask(fresh, "turn_off_led")[0] is fires
