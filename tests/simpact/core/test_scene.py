import pytest

from simpact.core.scene import Scene, SceneError, SceneObject


def box(**kw):
    values = {"name": "box", "shape": "box", "size": (0.05, 0.05, 0.05), "position": (0.5, 0.0, 0.025)}
    return SceneObject(**{**values, **kw})


@pytest.mark.parametrize(
    "change, message",
    [
        ({"shape": "cone"}, "object 'box': unknown shape 'cone'"),
        ({"size": (0.05, 0.05)}, "size must be 3 positive numbers for a box"),
        ({"size": (0.05, -0.05, 0.05)}, "size must be 3 positive numbers"),
        ({"position": (0.5, float("nan"), 0.0)}, "position must be 3 finite numbers"),
        ({"quaternion": (1.0, 1.0, 0.0, 0.0)}, "unit norm"),
        ({"mass": 0.0}, "mass must be positive"),
        ({"friction": -0.1}, "friction must be non-negative"),
        ({"kind": "fluid"}, "kind must be rigid, pd or mpm"),
        ({"shape": "mesh", "size": (1.0, 1.0, 1.0)}, "shape 'mesh' needs a 'mesh' file"),
    ],
)
def test_bad_objects_name_the_object_and_field(change, message):
    with pytest.raises(SceneError, match=message.replace("(", "\\(").replace(")", "\\)")):
        box(**change)


def test_scene_round_trip_and_lookups():
    scene = Scene.from_dict(
        {
            "objects": [box().to_dict(), box(name="other").to_dict()],
            "robot": {"position": [0.4, 0.0, 0.3], "yaw": 0.5},
        }
    )
    assert Scene.from_dict(scene.to_dict()) == scene
    assert scene.object("other").name == "other"
    moved = scene.replace_object(scene.object("box").moved(position=(0.6, 0.0, 0.025)))
    assert moved.object("box").position == (0.6, 0.0, 0.025)
    with pytest.raises(SceneError, match="no object named 'cup'"):
        scene.object("cup")
    with pytest.raises(SceneError, match="unknown fields \\['colour'\\]"):
        SceneObject.from_dict({**box().to_dict(), "colour": "red"})
    with pytest.raises(SceneError, match="repeated: \\['box'\\]"):
        Scene((box(), box()))


def test_a_deformable_object_carries_its_particles_and_material():
    raw = {
        "name": "dough",
        "shape": "box",
        "size": [0.1, 0.04, 0.03],
        "position": [0.5, 0.0, 0.015],
        "kind": "mpm",
        "particles": "dough.npy",
        "material": {"model": "plasticine", "youngs_modulus": 2.0e5, "yield_stress": 1.0e3},
    }
    obj = SceneObject.from_dict(raw)
    assert obj.kind == "mpm" and obj.material["model"] == "plasticine"
    assert SceneObject.from_dict(obj.to_dict()) == obj
    hash(obj)  # usable in sets and as a key despite its material mapping
    rigid = SceneObject("box", "box", (0.1, 0.1, 0.1), (0.5, 0.0, 0.05))
    assert "material" not in rigid.to_dict() and "particles" not in rigid.to_dict()
