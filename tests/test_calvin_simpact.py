"""Mode ``simpact-offline`` of ``bench calvin``: the scene of a CALVIN state, the action mapping, goals per
family, and one subtask solved end to end (rebuild back-end, needs PyBullet and the CALVIN data)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("pybullet")

from simpact.bench import calvin_simpact as cs  # noqa: E402
from simpact.bench.calvin import MODES  # noqa: E402
from simpact.bench.calvin_execute import untilt  # noqa: E402
from simpact.calvin.data import CalvinDataMissing, load_chains  # noqa: E402
from simpact.core.scene import RobotStart, Scene, SceneObject  # noqa: E402

try:
    CHAINS = load_chains(0, 40)
except CalvinDataMissing:  # pragma: no cover - data folder absent
    pytest.skip("CALVIN data not found", allow_module_level=True)


@pytest.fixture
def env():
    from simpact.calvin.env import CalvinEnv

    e = CalvinEnv()
    yield e
    e.close()


def test_mode_registered() -> None:
    assert MODES["simpact-offline"] is cs.simpact_offline_policy


def test_scene_of_chain0_matches_its_observations(env) -> None:
    chain = CHAINS[0]
    env.reset(chain.robot_obs, chain.scene_obs)
    scene = cs.calvin_scene(env)
    for i, color in enumerate(("red", "blue", "pink")):
        want = cs.to_scene(chain.scene_obs[6 + 6 * i : 9 + 6 * i])
        got = np.asarray(scene.object(f"block_{color}").position)
        assert np.linalg.norm(got - want) < 1e-3, color
        # resting on the table: the bottom (0.04 m high blocks) at the scene's z = 0
        assert abs(got[2] - 0.02) < 2e-3
    assert np.linalg.norm(np.asarray(scene.robot.position) - cs.to_scene(chain.robot_obs[:3])) < 1e-3
    assert np.allclose(cs.to_calvin(cs.to_scene(chain.robot_obs[:3])), chain.robot_obs[:3])
    # the door (slider 0.28) leaves the plank open over x -0.095..0.164: the cabinet's boxes are cut there
    # (the pink block stands in that opening); those over the door's half would overlap the red block
    # behind it and are left out; the button stays
    names = {o.name for o in scene.objects}
    assert {"button_housing", "cabinet_front_1", "cabinet_back_1", "cabinet_over_plank_0"} <= names
    assert "cabinet_front_0" not in names and "cabinet_back_0" not in names
    assert scene.robot.holding is None
    # CALVIN's yaw 1.5 (fingers closing along x) is SIMPACT's yaw about 0
    assert abs(scene.robot.yaw - (chain.robot_obs[5] - np.pi / 2)) < 1e-6


def test_the_switch_knob_box_matches_calvins_knob_where_a_fingertip_pushes_it(env) -> None:
    """The knob's box at switch 0 against ray probes of CALVIN's knob at x = 0.30: its front face within
    4 mm of the mesh's (rounded) face on average over its height, its top no higher than the mesh's (a
    plan that pushed up the slot at the old box's 12 mm higher top had CALVIN's rounded fingertip slide
    over the knob)."""
    from simpact.bench.calvin_parts import PARTS

    chain = CHAINS[0]
    obs = np.array(chain.scene_obs, dtype=float)
    obs[3] = 0.0
    env.reset(chain.robot_obs, obs)
    low, high = PARTS["switch"].corners(0.0)
    pb, cid, uid = env.pb, env.cid, env.table.uid
    zs = np.linspace(low[2] + 0.003, high[2] - 0.003, 5)
    hits = pb.rayTestBatch([[0.30, -0.3, z] for z in zs], [[0.30, 0.3, z] for z in zs], physicsClientId=cid)
    assert all(h[0] == uid and h[1] == env.table.links["switch_link"] for h in hits)
    assert abs(np.mean([h[3][1] for h in hits]) - low[1]) < 0.004
    top = pb.rayTestBatch([[0.30, low[1] + 0.01, 1.0]], [[0.30, low[1] + 0.01, 0.3]], physicsClientId=cid)[0]
    assert top[1] == env.table.links["switch_link"] and high[2] <= top[3][2] + 0.001


def test_the_articulated_parts_are_in_the_scene_at_calvins_joint_positions(env) -> None:
    """Chain 0: slider 0.28 (left), button 0, switch 0.088 (on); the parts' joints in the MuJoCo world of
    the scene are CALVIN's, the slider's handle at x = 0.04 - q (CALVIN frame), the button's cap above its
    housing."""
    from solvers.mujoco.world import MujocoWorld

    chain = CHAINS[0]
    env.reset(chain.robot_obs, chain.scene_obs)
    scene = cs.calvin_scene(env)
    state = MujocoWorld(scene).state()
    for name, k in (("slider", 0), ("drawer", 1), ("button", 2), ("switch", 3)):
        part = scene.object(name)
        assert part.fixed and part.joint["type"] == "slide"
        assert part.joint["position"] == pytest.approx(chain.scene_obs[k], abs=1e-9)
        assert state.objects[name].joint == pytest.approx(chain.scene_obs[k], abs=1e-4), name
    assert cs.to_calvin(scene.object("slider").position)[0] == pytest.approx(0.04 - chain.scene_obs[0])
    cap, housing = scene.object("button"), scene.object("button_housing")
    assert cap.position[2] - cap.size[2] / 2 == pytest.approx(housing.position[2] + housing.size[2] / 2)
    # the drawer's handle lies under the table top: its scenes open the table's front
    assert cs.to_calvin(scene.object("drawer").position)[2] < cs.TABLE_Z
    opened = cs.calvin_scene(env, open_front=True)
    assert opened.table_size == (0.05, 0.05) and "table_top" in {o.name for o in opened.objects}


def test_scene_from_the_frame_matches_the_ground_truth(env) -> None:
    """real2sim's masks back-end on the static camera: the blocks it sees within 1 cm of the simulator's,
    the one inside the cabinet (unseen in chain 29) taken from the simulator."""
    chain = CHAINS[29]
    env.reset(chain.robot_obs, chain.scene_obs)
    seen = cs.frame_blocks(env)
    truth = cs.calvin_scene(env, "ground_truth")
    assert set(seen) == {"block_red", "block_blue"}
    for name, obj in seen.items():
        assert np.linalg.norm(np.subtract(obj.position, truth.object(name).position)) < 0.01, name
        assert np.allclose(sorted(obj.size), sorted(truth.object(name).size), atol=0.005), name
    scene = cs.calvin_scene(env, "frame")
    assert scene.object("block_pink") == truth.object("block_pink")
    assert np.allclose(scene.object("block_red").position, seen["block_red"].position, atol=1e-6)


def test_action_mapping_moves_the_end_effector(env) -> None:
    chain = CHAINS[0]
    env.reset(chain.robot_obs, chain.scene_obs)
    before = env.robot_obs()[:3].copy()
    mover = cs.execute(
        env, [{"type": "MOVE", "dx": 0.05, "dy": 0.0, "dz": 0.0}, {"type": "LIFT", "dz": 0.03}]
    )
    mover.to(mover.pos, hold=15)  # let the arm settle on the last target
    moved = env.robot_obs()[:3] - before
    assert np.linalg.norm(moved - [0.05, 0.0, 0.03]) < 0.01, moved


def _scene(*objects: SceneObject) -> Scene:
    return Scene(tuple(objects), RobotStart())


def _block(name: str, z: float) -> SceneObject:
    return SceneObject(name, "box", (0.04, 0.04, 0.04), (0.5, 0.3, z), mass=1.0)


def test_goals_per_family() -> None:
    scene = _scene(_block("block_red", 0.02), _block("block_blue", 0.06), _block("block_pink", 0.02))
    assert cs.goal_for("lift_red_block_table", scene) == [
        {"lifted": {"object": "block_red", "dz": 0.06, "held": True}}
    ]
    assert cs.goal_for("lift_red_block_slider", scene) == cs.goal_for("lift_red_block_table", scene)
    push = cs.goal_for("push_pink_block_left", scene)
    assert push[0]["at"]["x"] == pytest.approx(0.5 - 0.15)
    assert cs.goal_for("unstack_block", scene)[0]["lifted"]["object"] == "block_blue"
    assert cs.goal_for("rotate_red_block_left", scene) == [
        {
            "turned": {
                "object": "block_red",
                "min_deg": 80,
                "direction": "ccw",
                "max_tilt_deg": 20,
                "max_move": 0.05,
            }
        }
    ]
    assert cs.goal_for("rotate_pink_block_right", scene)[0]["turned"]["direction"] == "cw"
    assert cs.goal_for("move_slider_left", scene) == [{"joint_at": {"object": "slider", "moved": 0.15}}]
    assert cs.goal_for("move_slider_right", scene) == [{"joint_at": {"object": "slider", "moved": -0.15}}]
    assert cs.goal_for("turn_off_led", scene) == [{"joint_at": {"object": "button", "above": 0.01}}]
    assert cs.goal_for("turn_on_lightbulb", scene) == [{"joint_at": {"object": "switch", "above": 0.044}}]
    assert cs.goal_for("turn_off_lightbulb", scene) == [{"joint_at": {"object": "switch", "below": 0.044}}]
    assert cs.goal_for("open_drawer", scene) == [{"joint_at": {"object": "drawer", "moved": 0.12}}]
    assert cs.goal_for("close_drawer", scene) == [{"joint_at": {"object": "drawer", "moved": -0.12}}]
    from simpact.calvin.data import SUBTASKS

    assert set(SUBTASKS) <= set(cs.GOALS)  # all 34 have a goal
    with pytest.raises(cs.Unsupported, match="unsupported in simpact-offline"):
        cs.goal_for("juggle_blocks", scene)
    with pytest.raises(cs.SimpactError, match="no block stands"):
        cs.goal_for("unstack_block", _scene(_block("block_red", 0.02)))
    spec = cs.subtask_task("lift_red_block_table", "lift it", scene)
    assert spec.goal is not None


def test_goals_of_the_subtasks_that_start_with_a_block_in_the_hand() -> None:
    """A scene whose robot holds the red block, the door at 0.28 (slider left), a blue block on the plank's
    open part and the pink one on the table top."""
    from simpact.bench.calvin_parts import slider_openings

    held = _block("block_red", 0.2)
    robot = RobotStart((0.5, 0.3, 0.2), 0.0, 0.04, holding="block_red")
    joint = {"type": "slide", "axis": [-1, 0, 0], "range": [0, 0.28], "position": 0.28}
    part = SceneObject("slider", "box", (0.05, 0.07, 0.085), (0.3, 0.5, 0.1), fixed=True, joint=joint)
    blocker = SceneObject("block_blue", "box", (0.04, 0.04, 0.04), (0.41, 0.55, 0.021), mass=1.0)
    scene = Scene((held, blocker, _block("block_pink", 0.02), part), robot)
    goal = cs.goal_for("place_in_slider", scene)
    region = goal[0]["in_region"]
    (a, b), = slider_openings(0.28)  # fmt: skip
    low, high = cs.to_scene([a, 0.016, 0.441]), cs.to_scene([b, 0.164, 0.441])
    assert low[0] < region["min"][0] < region["max"][0] < high[0]
    assert region["min"][0] > 0.41 + 0.02 or region["max"][0] < 0.41 - 0.02  # clear of the blue block
    assert low[1] < region["min"][1] <= region["max"][1] < high[1]
    assert region["min"][2] < 0.021 < region["max"][2]  # resting on the plank, level with the table
    assert goal[1] == {"not_touched": {"object": "block_red", "during": "end"}}
    stack = cs.goal_for("stack_block", scene)
    assert [g["on_top_of"]["onto"] for g in stack[0]["any"]] == ["block_pink"]  # on the table top
    with pytest.raises(cs.SimpactError, match="the drawer is not in the scene"):
        cs.goal_for("place_in_drawer", scene)
    with pytest.raises(cs.SimpactError, match="holds no block"):
        cs.goal_for("stack_block", dataclasses.replace(scene, robot=RobotStart()))


def test_goals_of_the_drawers_inside() -> None:
    """The drawer open (0.22): push_into_drawer puts a block from the table top on its floor, in front of
    the table's edge; the lift from it counts from its floor; shut, the inside cannot be reached."""
    from simpact.bench.calvin_parts import DRAWER_INSIDE

    def drawer(q: float) -> SceneObject:
        joint = {"type": "slide", "axis": [0, -1, 0], "range": [0, 0.22], "position": q}
        return SceneObject("drawer", "box", (0.24, 0.02, 0.04), (0.52, 0.2, -0.08), fixed=True, joint=joint)

    table_block = _block("block_pink", 0.02)  # CALVIN (0.16, -0.16, 0.46): on the table top
    scene = _scene(table_block, drawer(0.22))
    (any_of,) = cs.goal_for("push_into_drawer", scene)
    region = any_of["any"][0][0]["in_region"]
    assert region["object"] == "block_pink"
    floor = cs.to_scene(DRAWER_INSIDE[0])[2]
    assert region["min"][2] < floor + 0.02 < region["max"][2]  # resting on the floor
    assert cs.to_calvin([0, region["max"][1], 0])[1] < -0.182 - 0.02  # past the table's edge
    lift = cs.goal_for("lift_red_block_drawer", scene)[0]["lifted"]
    assert lift["from_z"] == pytest.approx(floor, abs=1e-4) and lift["held"] is True
    with pytest.raises(cs.SimpactError, match="drawer is closed"):
        cs.goal_for("push_into_drawer", _scene(table_block, drawer(0.0)))


@pytest.mark.parametrize(
    ("index", "task"),
    [(2, "place_in_slider"), (14, "stack_block"), (30, "place_in_drawer"), (21, "lift_pink_block_drawer")],
)
def test_hand_start_and_drawer_inside_families_end_to_end(env, index: int, task: str) -> None:
    """The subtasks before it scripted, then the subtask planned and judged in CALVIN: a place or stack in
    a scene whose robot starts holding the lifted block (``place``, no new grasp); a lift out of the drawer,
    its inside in the scene."""
    from simpact.bench.calvin_family import family_attempts

    (row,) = family_attempts(env, task, [CHAINS[index]], 1)
    assert row["prefix_ok"] and row["success"], row
    said = row["subtask"]["policy"]
    assert said["planner_success"] is True
    kinds = [a["type"] for a in cs.LAST["actions"]]
    if task.startswith("lift"):
        assert said["held_block"] is None and "GRASP" in kinds
    else:
        assert said["held_block"] is not None and "GRASP" not in kinds and "RELEASE" in kinds


def test_lift_red_block_table_end_to_end(env) -> None:
    """Chain 29 starts with lift_red_block_table: planned in SIMPACT, executed and judged in CALVIN."""
    from simpact.calvin.evaluate import evaluate_chain

    chain = CHAINS[29]
    assert chain.sequence[0] == "lift_red_block_table"
    record = evaluate_chain(
        env, dataclasses.replace(chain, sequence=chain.sequence[:1]), MODES["simpact-offline"]
    )
    assert record["completed"] == 1, record
    said = record["subtasks"][0]["policy"]  # the subtask's record says what the policy saw and planned
    assert said["planner_success"] is True
    assert said["scene_source"] == "frame"
    assert said["ground_truth_blocks"] == ["block_pink"]  # inside the cabinet, unseen
    assert "ground-truth goal" in said["privileged"]


def test_rotate_blue_block_right_end_to_end(env) -> None:
    """Chain 0 starts with rotate_blue_block_right: the ``turn`` primitive, planned in SIMPACT, turns the
    block clockwise in CALVIN."""
    from simpact.calvin.evaluate import evaluate_chain

    chain = CHAINS[0]
    assert chain.sequence[0] == "rotate_blue_block_right"
    record = evaluate_chain(
        env, dataclasses.replace(chain, sequence=chain.sequence[:1]), MODES["simpact-offline"]
    )
    assert record["completed"] == 1, record
    assert record["subtasks"][0]["policy"]["planner_success"] is True
    assert any(a["type"] == "ROTATE" and a["dyaw"] < -1.0 for a in cs.LAST["actions"])


@pytest.mark.parametrize(
    ("index", "task"),
    [
        (12, "move_slider_left"),
        (21, "move_slider_right"),
        (13, "turn_on_led"),
        (28, "turn_off_lightbulb"),
        (4, "open_drawer"),
        (0, "close_drawer"),  # chain 0 starts with the drawer open (0.22)
    ],
)
def test_joint_families_end_to_end(env, index: int, task: str) -> None:
    """A chain starting with a slider, button or switch subtask: the ``actuate`` primitive, planned in
    SIMPACT's world of the scene with the part's joint goal, moves the part in CALVIN past its check."""
    from simpact.calvin.evaluate import evaluate_chain

    chain = CHAINS[index]
    assert chain.sequence[0] == task or task == "close_drawer"
    record = evaluate_chain(env, dataclasses.replace(chain, sequence=(task,)), MODES["simpact-offline"])
    assert record["completed"] == 1, record
    assert record["subtasks"][0]["policy"]["planner_success"] is True
    assert cs.LAST["family"] == task


def test_a_failing_policy_fails_the_subtask_and_says_why(env) -> None:
    """place_in_slider with nothing in the hand (chain 4 starts with open_drawer): the scene's robot holds
    no block, so the goal cannot be made; the subtask fails, its record says why and what was seen."""
    from simpact.calvin.evaluate import evaluate_chain

    chain = dataclasses.replace(CHAINS[4], sequence=("place_in_slider", "open_drawer"))
    record = evaluate_chain(env, chain, MODES["simpact-offline"])
    assert record["completed"] == 0
    assert "holds no block" in record["subtasks"][0]["policy_error"]
    assert record["subtasks"][0]["steps"] == 0
    assert record["subtasks"][0]["policy"]["family"] == "place_in_slider"


def test_a_hand_left_tilted_points_down_again_before_the_next_scene(env) -> None:
    """CALVIN's check stops a tilted switch execution where it succeeds; the next subtask first turns the
    hand down and backs off, so SIMPACT's FR3 can start where CALVIN's tool is."""
    from simpact.calvin.scripted import Mover

    chain = CHAINS[28]
    env.reset(chain.robot_obs, chain.scene_obs)
    m = Mover(env)
    m.roll -= cs.TILT["turn_off_lightbulb"]
    m.by([0.0, 0.0, 0.0], hold=10)
    before, euler = env.robot.tcp_pose()
    assert abs(abs(euler[0]) - np.pi) > 0.5
    untilt(env)
    after, euler = env.robot.tcp_pose()
    assert abs(abs(euler[0]) - np.pi) < 0.05
    assert after[1] < before[1] - 0.08


def test_a_subtask_after_the_drawer_is_planned_with_the_table_open_in_front(env) -> None:
    """open_drawer leaves the hand at the drawer's handle, under the table top: the next subtask's scene
    opens the table's front (a table plane would trap SIMPACT's hand under it: the planner then spent its
    150 rollouts and found no success in its own simulation; with the front open, 14)."""
    from simpact.calvin.evaluate import evaluate_chain

    chain = CHAINS[4]
    assert chain.sequence[:2] == ("open_drawer", "lift_pink_block_table")
    env.reset(chain.robot_obs, chain.scene_obs)
    assert not cs.hand_below_table(env)
    record = evaluate_chain(
        env, dataclasses.replace(chain, sequence=chain.sequence[:2]), cs.simpact_offline_policy
    )
    assert record["completed"] == 2, record
    assert record["subtasks"][1]["policy"]["planner_success"] is True


def test_calvin_family_finds_the_chains_holding_a_subtask() -> None:
    from simpact.bench.calvin_family import holding_chains

    found = [(c.index, k) for c, k in holding_chains("place_in_slider", CHAINS[:5])]
    assert found == [(0, 3), (1, 3), (2, 1), (3, 2), (4, 2)]
