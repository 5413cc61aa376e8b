"""Reruns with one parameter changed: softer contact removes the overlapping-boxes artifact; a switch before
the artifact keeps the prefix bit-identical; a timestep change keeps the episode's duration."""

import pytest

from simpact.guard.replay import record_mjcf
from simpact.guard.rerun import Change, RerunError, rerun

BOXES = """<mujoco><option timestep="0.002"/>
<worldbody><geom name="floor" type="plane" size="2 2 0.1"/>
<body name="base" pos="0 0 0.05"><freejoint/>
  <geom type="box" size=".05 .05 .05" mass="0.2" solref="0.004 1"/></body>
<body name="lid" pos="0.005 0 0.3"><freejoint/>
  <geom type="box" size=".03 .03 .03" mass="0.1" solref="0.004 1"/></body>
</worldbody><keyframe><key qpos="0 0 0.05 1 0 0 0  0 0 0.11 1 0 0 0"/></keyframe></mujoco>"""


@pytest.fixture(scope="module")
def boxes(tmp_path_factory):
    path = tmp_path_factory.mktemp("scene") / "boxes.xml"
    path.write_text(BOXES)
    return record_mjcf(path, 500)


@pytest.mark.parametrize("setting", ["depenetration=0.3", "solref=0.02", "clamp=0.4"])
def test_softer_contact_no_longer_flags_the_overlapping_boxes(boxes, setting):
    result = rerun(boxes, setting)
    assert [e["body"] for e in result.original_flagged] == ["lid"]
    assert not result.flagged
    if result.peak_speed is not None:
        assert result.peak_speed < 0.5


def test_prefix_is_identical_before_a_switch(boxes, tmp_path):
    # a late artifact: the same pair of boxes, overlap created by a write at 0.9 s
    result = rerun(boxes, "depenetration=0.3", switch_before_artifact=True)
    assert result.switch_step == 0  # the artifact is at step 0 here
    path = tmp_path / "late.xml"
    path.write_text(BOXES.replace("<keyframe>", "<!--").replace("</keyframe>", "-->"))
    from simpact.guard.recorder import Recorder
    from simpact.guard.replay import _load_mjcf

    model, data, _ = _load_mjcf(path)
    rec_src = {
        "kind": "mjcf",
        "path": str(path),
        "sha256": __import__("hashlib").sha256(path.read_bytes()).hexdigest(),
    }
    recorder = Recorder(model, data, meta={"source": rec_src, "keyframe": None})
    for k in range(800):
        if k == 450:  # benchmark code drops the lid 2 cm into the base between steps
            data.qpos[7:10] = [0.0, 0.0, 0.11]
            data.qvel[6:] = 0.0
        recorder.step()
    rec = recorder.close()
    result = rerun(rec, "depenetration=0.3", switch_before_artifact=True)
    assert result.original_flagged and result.original_flagged[0]["onset_step"] >= 450
    assert result.switch_step == result.original_flagged[0]["onset_step"] - 50
    assert result.prefix_exact is True and result.prefix_divergence is None
    assert not result.flagged


def test_timestep_change_keeps_the_duration(boxes):
    result = rerun(boxes, "timestep=0.001")
    assert result.nsteps == 1000


def test_bad_changes_are_refused(boxes):
    with pytest.raises(RerunError, match="PARAM"):
        Change.parse("gravity=3")
    with pytest.raises(RerunError, match="positive"):
        Change.parse("mass=-1")
    with pytest.raises(RerunError, match="no body named"):
        rerun(boxes, "mass:nothing=1")
