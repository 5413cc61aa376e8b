"""SimuGuard recordings on disk: npz chunks plus a manifest, read back unchanged."""

import json

import mujoco
import numpy as np
import pytest

from simpact.guard import Recorder, Recording, Thresholds, load_recording, model_hash, save_recording
from simpact.guard.store import RecordingError

XML = """<mujoco><option timestep="0.002"/><worldbody>
  <geom name="floor" type="plane" size="1 1 0.1"/>
  <body name="fr3_finger" pos="0 0 0.3" mocap="true"><geom type="box" size="0.01 0.01 0.01"/></body>
  <body name="a" pos="0 0 0.05"><freejoint/><geom type="box" size="0.05 0.05 0.05" mass="0.2"/></body>
  <body name="b" pos="0.01 0 0.2"><freejoint/><geom type="sphere" size="0.03" mass="0.1"/></body>
</worldbody></mujoco>"""


def record(out=None, steps=620, **kwargs) -> tuple[Recorder, Recording]:
    model = mujoco.MjModel.from_xml_string(XML)
    data = mujoco.MjData(model)
    recorder = Recorder(model, data, out=out, robot_prefix="fr3_", seed=7, **kwargs)
    for k in range(steps):
        data.mocap_pos[0, 2] = 0.3 - 1e-4 * k
        recorder.step()
    return recorder, recorder.close()


def assert_same(a: Recording, b: Recording) -> None:
    for name in ("time", "xpos", "xquat", "vel", "contact_start", "contact_bodies", "contact_impulse"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(a.contact_depth, b.contact_depth)
    assert np.array_equal(a.snapshot_step, b.snapshot_step) and np.array_equal(a.snapshots, b.snapshots)
    assert a.actuation.keys() == b.actuation.keys() and a.writes.keys() == b.writes.keys()
    for logs_a, logs_b in ((a.actuation, b.actuation), (a.writes, b.writes)):
        for key, (steps, values) in logs_a.items():
            assert np.array_equal(steps, logs_b[key][0]) and np.array_equal(values, logs_b[key][1]), key


def test_recording_folder_round_trip(tmp_path):
    recorder, in_memory = record(tmp_path / "rec", thresholds=Thresholds(min_speed=0.4))
    names = sorted(p.name for p in (tmp_path / "rec").iterdir())
    assert names == ["chunk_00000.npz", "chunk_00001.npz", "chunk_00002.npz", "manifest.json"]
    with np.load(tmp_path / "rec" / "chunk_00001.npz") as chunk:  # plain npz
        assert chunk["time"].shape == (250,) and int(chunk["first_step"]) == 250
    loaded = load_recording(tmp_path / "rec")
    assert loaded.nsteps == 620
    assert_same(in_memory, loaded)
    m = json.loads((tmp_path / "rec" / "manifest.json").read_text())
    assert m["nsteps"] == 620 and m["seed"] == 7 and m["timestep"] == 0.002
    assert m["bodies"] == ["world", "fr3_finger", "a", "b"]
    assert m["roles"] == ["static", "robot", "object", "object"]
    assert m["thresholds"]["min_speed"] == 0.4
    assert m["model_hash"] == model_hash(recorder.model) and len(m["model_hash"]) == 64
    assert m["errors"] == 0
    assert recorder.bytes_written > 0
    # the mocap pose changed every step, the ctrl never (the model has no actuators)
    assert loaded.actuation["mocap_pos"][0].tolist() == list(range(620))


def test_save_and_load_an_in_memory_recording(tmp_path):
    _, rec = record(steps=300)
    save_recording(rec, tmp_path / "copy")
    assert_same(rec, load_recording(tmp_path / "copy"))


def test_synchronous_writes_give_the_same_files(tmp_path):
    _, a = record(tmp_path / "a", steps=300)
    _, b = record(tmp_path / "b", steps=300, background_write=False)
    assert_same(load_recording(tmp_path / "a"), load_recording(tmp_path / "b"))


def test_model_hash_tells_models_apart():
    m1 = mujoco.MjModel.from_xml_string(XML)
    m2 = mujoco.MjModel.from_xml_string(XML)
    m3 = mujoco.MjModel.from_xml_string(XML.replace('mass="0.1"', 'mass="0.11"'))
    assert model_hash(m1) == model_hash(m2) != model_hash(m3)


def test_loading_a_folder_without_manifest_is_a_clear_error(tmp_path):
    with pytest.raises(RecordingError, match="not a SimuGuard recording"):
        load_recording(tmp_path)
