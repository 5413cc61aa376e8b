"""The labelled SimuGuard suite: seeded episodes, one per family, audited to their labels."""

import mujoco
import numpy as np
import pytest

from simpact.guard import Recorder, detect
from simpact.guard.suite import FAMILIES, POSITIVES, episode, free_jumps, run_episode, suite

# One seed per family (seed % 9 picks the family).
ONE_PER_FAMILY = [0, 1, 2, 3, 4, 5, 6, 7, 8]


def test_suite_is_seeded_and_covers_every_family():
    episodes = suite(range(54))
    assert len(episodes) == 54
    assert {e.family for e in episodes} == set(FAMILIES)
    assert sum(e.artifact for e in episodes) == 6 * len(POSITIVES)
    again = episode(13)
    assert again.xml == episodes[13].xml and again.params == episodes[13].params
    assert episode(13).params != episode(22).params  # same family, other parameters
    with pytest.raises(ValueError, match="unknown family"):
        episode(0, family="nope")


@pytest.mark.parametrize("seed", ONE_PER_FAMILY)
def test_each_family_gets_its_label(seed):
    ep = episode(seed)
    recording, events = run_episode(ep)
    assert recording.nsteps == ep.steps and recording.manifest.errors == 0
    flagged = {e.body for e in events if e.flagged}
    if ep.artifact:
        assert ep.body in flagged, (ep.name, [e.to_dict() for e in events])
    else:
        assert not flagged, (ep.name, [e.to_dict() for e in events])


def test_hard_negatives_really_do_what_they_claim():
    push = run_episode(episode(5))[0]  # robot_push: the box moved along x
    assert push.xpos[-1, push.manifest.body_id("box"), 0] > 0.1
    lift = run_episode(episode(7))[0]  # gripper_lift: the box left the floor by 10 cm
    box = lift.manifest.body_id("box")
    assert lift.xpos[:, box, 2].max() > lift.xpos[0, box, 2] + 0.1
    assert lift.manifest.roles[lift.manifest.body_id("fr3_finger_l")] == "robot"


def test_a_kick_in_mid_air_needs_the_jump_rule():
    recording, events = run_episode(episode(2))  # kick_air
    assert not any(e.flagged for e in detect(recording))  # the paper's stage 1 needs a recent contact
    jumps = free_jumps(recording)
    assert [e.ejection.reason for e in jumps] == ["jump without contact"]
    assert jumps[0].flagged and jumps[0].contact_pair == ("", "")
    assert any(e.flagged for e in events)


def test_free_fall_and_resting_bodies_give_no_jumps():
    xml = """<mujoco><option timestep="0.002"/><worldbody><geom type="plane" size="1 1 .1"/>
      <body name="ball" pos="0 0 1"><freejoint/><geom type="sphere" size=".02" mass=".05"/></body>
      </worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    recorder = Recorder(model, data, robot_prefix="fr3_", model_hash="test")
    for _ in range(600):  # falls 1 m (4.4 m/s), lands, bounces
        recorder.step()
    recording = recorder.close()
    assert np.linalg.norm(recording.vel[:, 1], axis=-1).max() > 4.0
    assert free_jumps(recording) == []
