"""Exact replay: a contact-rich task episode replays bit for bit in a fresh process; an altered recording is
reported at its first divergence."""

import json
import subprocess
import sys

import numpy as np
import pytest

from simpact.guard import load_recording, save_recording
from simpact.guard.replay import record_mjcf, record_task_rollout, replay
from simpact.tasks import load_task
from solvers.world import make_world

BOXES = """<mujoco><option timestep="0.002"/>
<worldbody><geom name="floor" type="plane" size="2 2 0.1"/>
<body name="base" pos="0 0 0.05"><freejoint/>
  <geom type="box" size=".05 .05 .05" mass="0.2" solref="0.004 1"/></body>
<body name="lid" pos="0 0 0.11"><freejoint/>
  <geom type="box" size=".03 .03 .03" mass="0.1" solref="0.004 1"/></body>
</worldbody></mujoco>"""


@pytest.fixture(scope="module")
def bowl(tmp_path_factory):
    out = tmp_path_factory.mktemp("rec") / "bowl"
    return out, record_task_rollout("bowl_stacking", 0, out=out)


def test_task_episode_replays_exactly_in_a_fresh_process(bowl):
    out, rec = bowl
    assert rec.contact_bodies.shape[0] > 1000 and rec.manifest.meta["outcome"]["success"]
    done = subprocess.run(
        [sys.executable, "-m", "simpact.guard.replay", str(out)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["exact"] and result["first_divergence"] is None
    assert result["snapshots_checked"] == len(rec.snapshot_step) > 20


def test_recorded_outcome_matches_the_worlds_rollout(bowl):
    _, rec = bowl
    task = load_task("bowl_stacking")
    scene = task.scene(0)
    world = make_world(scene)
    rollout = world.rollout(task.reference_plan(scene, world.start_pose()), tail_s=task.tail_s)
    evaluation = task.evaluate(rollout, scene, 0)
    assert rec.manifest.meta["outcome"] == {"success": evaluation.success, "score": evaluation.score}


def test_altered_recording_is_reported_at_its_first_divergence(tmp_path):
    scene = tmp_path / "boxes.xml"
    scene.write_text(BOXES)
    rec = record_mjcf(scene, 600, out=tmp_path / "rec")
    assert replay(tmp_path / "rec").exact
    lid = rec.manifest.body_id("lid")
    rec.xpos[321, lid, 2] = np.nextafter(rec.xpos[321, lid, 2], 1.0)  # one ulp
    rec.vel[400, lid, 0] += 1.0
    save_recording(rec, tmp_path / "altered")
    result = replay(load_recording(tmp_path / "altered"))
    assert not result.exact
    d = result.first_divergence
    assert (d.step, d.array, d.where) == (321, "xpos", "lid z")
    assert d.recorded != d.replayed and abs(d.recorded - d.replayed) < 1e-15
    assert result.snapshots_checked == 2  # steps 0 and 250 matched


def test_altered_snapshot_and_changed_scene_are_reported(tmp_path):
    scene = tmp_path / "boxes.xml"
    scene.write_text(BOXES)
    rec = record_mjcf(scene, 300, out=tmp_path / "rec")
    rec.snapshots[1, 5] += 1e-9
    d = replay(rec).first_divergence
    assert d is not None and (d.step, d.array) == (250, "snapshot") and d.where.startswith("qpos")
    scene.write_text(BOXES.replace('mass="0.1"', 'mass="0.2"'))
    with pytest.raises(ValueError, match="changed since it was recorded"):
        replay(tmp_path / "rec")
