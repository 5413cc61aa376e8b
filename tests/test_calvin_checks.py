"""CALVIN data and the 34 subtask checks on hand-made snapshots (no PyBullet): each family fires on a change
that achieves it and not on one that falls short or breaks one of its conditions."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from simpact.calvin.checks import BlockState, Snapshot, achieved, check
from simpact.calvin.data import (
    CALVIN_DATA_ENV,
    SUBTASKS,
    CalvinDataMissing,
    calvin_data_dir,
    instructions,
    load_chains,
    task_table,
)
from simpact.core.errors import SimpactError
from tests.calvin_data import needs_calvin_data

pytestmark = needs_calvin_data

ROBOT, TABLE = 1, 2
LINKS = {"base_link": -1, "slide_link": 2, "drawer_link": 3, "plank_link": 6}
TABLE_TOP, DRAWER, PLANK = (TABLE, -1), (TABLE, 3), (TABLE, 6)
UIDS = {"red": 3, "blue": 4, "pink": 5}


def block(color: str, pos=(0.0, 0.0, 0.46), yaw_deg=0.0, contacts=(TABLE_TOP,), vel=0.0) -> BlockState:
    quat = tuple(Rotation.from_euler("z", yaw_deg, degrees=True).as_quat())
    return BlockState(UIDS[color], tuple(pos), quat, (vel, 0.0, 0.0), (0.0, 0.0, 0.0), frozenset(contacts))


def snap(robot_contacts=(), doors=(0.0, 0.0), lights=(0, 0), **blocks: BlockState) -> Snapshot:
    table = {c: block(c, pos=(0.1 * k, 0.0, 0.46)) for k, c in enumerate(UIDS)}
    table.update(blocks)
    return Snapshot(
        robot_uid=ROBOT,
        table_uid=TABLE,
        table_links=LINKS,
        doors={"base__slide": doors[0], "base__drawer": doors[1]},
        lights={"lightbulb": lights[0], "led": lights[1]},
        blocks=table,
        robot_contacts=frozenset(robot_contacts),
    )


def test_the_data_files_give_1000_chains_34_subtasks_and_their_instructions():
    chains = load_chains()
    assert len(chains) == 1000 and chains[0].index == 0
    assert all(
        len(c.sequence) == 5 and c.robot_obs.shape == (15,) and c.scene_obs.shape == (24,) for c in chains
    )
    assert tuple(task_table()) == SUBTASKS and len(SUBTASKS) == 34
    assert set(instructions()) >= set(SUBTASKS)
    assert instructions()["open_drawer"] == "pull the handle to open the drawer"
    assert {t for c in chains for t in c.sequence} == set(SUBTASKS)
    assert [c.index for c in load_chains(998, 5)] == [998, 999]


def test_missing_data_is_one_line_naming_the_setting(monkeypatch, tmp_path):
    monkeypatch.setenv(CALVIN_DATA_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(CalvinDataMissing, match=CALVIN_DATA_ENV):
        calvin_data_dir("eval_sequences_1000.json")
    with pytest.raises(SimpactError, match="unknown CALVIN subtask"):
        check("fly_away", snap(), snap())


def test_rotate_needs_60_degrees_about_z_a_small_move_and_a_non_robot_contact():
    start = snap()
    assert check("rotate_red_block_left", start, snap(red=block("red", yaw_deg=75)))
    assert not check("rotate_red_block_left", start, snap(red=block("red", yaw_deg=45)))
    assert not check("rotate_red_block_right", start, snap(red=block("red", yaw_deg=75)))
    assert check("rotate_red_block_right", start, snap(red=block("red", yaw_deg=-75)))
    held = block("red", yaw_deg=75, contacts=[(ROBOT, 10)])
    assert not check("rotate_red_block_left", start, snap(red=held))
    moved = block("red", pos=(0.0, 0.15, 0.46), yaw_deg=75)
    assert not check("rotate_red_block_left", start, snap(red=moved))


def test_push_needs_x_beyond_01_m_and_the_start_contacts_kept():
    start = snap()
    assert check("push_blue_block_right", start, snap(blue=block("blue", pos=(0.22, 0, 0.46))))
    assert not check("push_blue_block_right", start, snap(blue=block("blue", pos=(0.15, 0, 0.46))))
    assert check("push_blue_block_left", start, snap(blue=block("blue", pos=(-0.05, 0, 0.46))))
    lifted = block("blue", pos=(0.22, 0, 0.56), contacts=[(ROBOT, 10)])
    assert not check("push_blue_block_right", start, snap(blue=lifted))


def test_doors_move_by_more_than_their_thresholds():
    assert check("open_drawer", snap(doors=(0, 0.0)), snap(doors=(0, 0.13)))
    assert not check("open_drawer", snap(doors=(0, 0.0)), snap(doors=(0, 0.11)))
    assert check("close_drawer", snap(doors=(0, 0.22)), snap(doors=(0, 0.05)))
    assert check("move_slider_left", snap(doors=(0.0, 0)), snap(doors=(0.2, 0)))
    assert not check("move_slider_right", snap(doors=(0.0, 0)), snap(doors=(0.2, 0)))


def test_lift_needs_the_height_the_robot_as_only_contact_and_the_named_start_surface():
    up = block("pink", pos=(0.2, 0, 0.53), contacts=[(ROBOT, 10), (ROBOT, 12)])
    assert check("lift_pink_block_table", snap(), snap(pink=up))
    assert not check("lift_pink_block_drawer", snap(), snap(pink=up))
    low = replace(up, pos=(0.2, 0, 0.50))
    assert not check("lift_pink_block_table", snap(), snap(pink=low))
    assert not check(
        "lift_pink_block_table", snap(), snap(pink=replace(up, contacts=frozenset({(ROBOT, 10), TABLE_TOP})))
    )
    in_slider = snap(pink=block("pink", pos=(0.2, 0.1, 0.46), contacts=[PLANK]))
    assert check("lift_pink_block_slider", in_slider, snap(pink=replace(up, pos=(0.2, 0.1, 0.495))))


def test_place_needs_a_held_block_released_onto_the_named_link():
    held = block("red", pos=(0, -0.3, 0.45), contacts=[(ROBOT, 10)])
    start = snap(robot_contacts=[(UIDS["red"], -1)], red=held)
    placed = snap(red=block("red", pos=(0, -0.3, 0.34), contacts=[DRAWER]))
    assert check("place_in_drawer", start, placed)
    assert not check("place_in_slider", start, placed)
    still_held = replace(placed, robot_contacts=frozenset({(UIDS["red"], -1)}))
    assert not check("place_in_drawer", start, still_held)
    assert not check("place_in_drawer", snap(red=held), placed)  # the robot held nothing at the start


def test_stack_and_unstack_follow_block_to_block_contacts_and_speed():
    on_blue = block("red", pos=(0.1, 0, 0.50), contacts=[(UIDS["blue"], -1)])
    assert check("stack_block", snap(), snap(red=on_blue))
    assert not check("stack_block", snap(), snap(red=replace(on_blue, lin_vel=(1.5, 0.0, 0.0))))
    assert check("unstack_block", snap(red=on_blue), snap())
    assert not check("unstack_block", snap(red=on_blue), snap(red=on_blue))


def test_lights_flip_their_logical_state_and_push_into_drawer_changes_surface():
    assert check("turn_on_led", snap(lights=(0, 0)), snap(lights=(0, 1)))
    assert not check("turn_on_led", snap(lights=(0, 1)), snap(lights=(0, 1)))
    assert check("turn_off_lightbulb", snap(lights=(1, 0)), snap(lights=(0, 0)))
    fell = snap(blue=block("blue", pos=(0.2, -0.3, 0.34), contacts=[DRAWER]))
    assert check("push_into_drawer", snap(), fell)
    pushed_with_hand = snap(blue=block("blue", pos=(0.2, -0.3, 0.34), contacts=[DRAWER, (ROBOT, 10)]))
    assert not check("push_into_drawer", snap(), pushed_with_hand)


def test_achieved_reports_every_subtask_a_change_satisfies():
    after = snap(doors=(0.0, 0.2), lights=(1, 0), blue=block("blue", pos=(0.25, 0, 0.46)))
    assert achieved(snap(), after) == {"open_drawer", "turn_on_lightbulb", "push_blue_block_right"}
    assert achieved(snap(), snap()) == set()
    assert np.isfinite(snap().blocks["red"].quat).all()


def test_the_official_back_end_info_maps_onto_the_same_snapshot():
    """``PlayTableSimEnv.get_info()`` (calvin_env's layout: contact tuples with the other body at [2] and
    its link at [4]) becomes the snapshot the checks read."""
    from simpact.calvin.official import snapshot_from_info

    def contact(body: int, link: int) -> tuple:
        return (0, 0, body, -1, link, (0, 0, 0), (0, 0, 0), (0, 0, 1), 0.0, 1.0)

    def movable(uid: int, z: float, contacts: list) -> dict:
        still = (0, 0, 0)
        pose = {"current_pos": (0.1, 0.0, z), "current_orn": (0, 0, 0, 1)}
        return {"uid": uid, **pose, "current_lin_vel": still, "current_ang_vel": still, "contacts": contacts}

    def info(z: float, red_contacts: list, robot_contacts: list, drawer: float) -> dict:
        return {
            "robot_info": {"uid": ROBOT, "contacts": robot_contacts},
            "scene_info": {
                "fixed_objects": {"table": {"uid": TABLE, "links": LINKS}},
                "movable_objects": {
                    "block_red": movable(3, z, red_contacts),
                    "block_blue": movable(4, 0.46, [contact(TABLE, -1)]),
                    "block_pink": movable(5, 0.46, [contact(TABLE, -1)]),
                },
                "doors": {"base__slide": {"current_state": 0.0}, "base__drawer": {"current_state": drawer}},
                "lights": {"lightbulb": {"logical_state": 0}, "led": {"logical_state": 1}},
            },
        }

    start = snapshot_from_info(info(0.46, [contact(TABLE, -1)], [], 0.0))
    end = snapshot_from_info(info(0.53, [contact(ROBOT, 9)], [contact(3, -1)], 0.15))
    assert start.blocks["red"].contacts == {TABLE_TOP} and end.lights == {"lightbulb": 0, "led": 1}
    assert achieved(start, end) == {"lift_red_block_table", "open_drawer"}


def test_back_end_choice_is_explicit(monkeypatch):
    from simpact.calvin import official

    monkeypatch.setattr(official, "official_available", lambda: False)
    with pytest.raises(SimpactError, match="calvin_env is not importable"):
        official.make_env("official")
    with pytest.raises(SimpactError, match="back-end"):
        official.make_env("mujoco")
