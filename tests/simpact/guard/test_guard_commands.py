"""The audit verbs end to end on a tiny MJCF scene."""

import argparse
import json

import pytest

from simpact.cli.audit import add_parsers
from simpact.guard.episodes import AuditError

BOXES = """<mujoco><option timestep="0.002"/>
<worldbody><geom name="floor" type="plane" size="2 2 0.1"/>
<body name="base" pos="0 0 0.05"><freejoint/>
  <geom type="box" size=".05 .05 .05" mass="0.2" solref="0.004 1"/></body>
<body name="lid" pos="0 0 0.11"><freejoint/>
  <geom type="box" size=".03 .03 .03" mass="0.1" solref="0.004 1"/></body>
</worldbody></mujoco>"""


def run(*argv: str) -> dict:
    parser = argparse.ArgumentParser(prog="simpact")
    add_parsers(parser.add_subparsers(dest="verb", required=True))
    args = parser.parse_args(["audit", *argv])
    return args.func(args)


def test_audit_verbs_end_to_end(tmp_path, capsys):
    scene = tmp_path / "boxes.xml"
    scene.write_text(BOXES)
    rec = str(tmp_path / "rec")
    run("record", "--mjcf", str(scene), "--steps", "400", "--out", rec)
    det = run("detect", rec, "--out", str(tmp_path / "det"))
    assert json.loads((tmp_path / "det" / "result.json").read_text())["events"][0]["body"] == "lid"
    assert {"body", "onset_s", "peak_speed", "consequence_of"} <= set(det["events"][0])
    assert det["n_consequences"] == sum(e["consequence_of"] is not None for e in det["events"])
    assert run("replay", rec, "--out", str(tmp_path / "rep"))["exact"] is True
    out = run("rerun", rec, "--set", "depenetration=0.3", "--out", str(tmp_path / "rr"))
    assert out["original_artifact"] and not out["flagged"]
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 4 and lines[2].startswith("audit replay: exact")
    with pytest.raises(AuditError, match="no outcome"):
        run("score", str(tmp_path / "rr"))
    with pytest.raises(AuditError, match="exactly one"):
        run("record", "--out", rec)
    with pytest.raises(AuditError, match="cannot read"):
        run("replay", str(tmp_path / "missing"))


def test_audit_settle_on_a_scene_file(tmp_path, capsys):
    from simpact.core.scene import Scene, SceneObject

    lid = SceneObject("lid", "box", (0.08, 0.08, 0.08), (0.5, 0.0, 0.07), mass=0.05)
    crate = SceneObject("crate", "box", (0.1, 0.1, 0.1), (0.5, 0.0, 0.05), mass=0.5)
    path = tmp_path / "scene.json"
    path.write_text(json.dumps(Scene((crate, lid)).to_dict()))
    out = run("settle", "--scene", str(path), "--seconds", "0.5", "--out", str(tmp_path / "settle"))
    saved = json.loads((tmp_path / "settle" / "result.json").read_text())
    assert saved == json.loads(json.dumps(out)) and not saved["clean"] and saved["artifacts"] == 1
    assert saved["overlaps"][0]["bodies"] == ["crate", "lid"]
    printed = capsys.readouterr().out
    assert printed.startswith("audit settle: NOT clean, 1 artifacts, deepest overlap 70.0 mm")
    assert saved["shifted"] == ["lid"] and ", did not rest where placed: lid ->" in printed  # thrown out
    with pytest.raises(AuditError, match="exactly one of --scene"):
        run("settle", "--out", str(tmp_path / "x"))
