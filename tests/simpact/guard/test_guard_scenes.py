"""SimuGuard on small MuJoCo scenes: positive controls are flagged, hard negatives are not."""

from collections.abc import Callable

import mujoco

from simpact.guard import Event, Recorder, detect

Control = Callable[[int, mujoco.MjModel, mujoco.MjData], None]

BIN = """
<geom type="box" pos="0 0 0.005" size=".1 .1 .005"/>
<geom type="box" pos=".1 0 .05" size=".005 .1 .05"/><geom type="box" pos="-.1 0 .05" size=".005 .1 .05"/>
<geom type="box" pos="0 .1 .05" size=".1 .005 .05"/><geom type="box" pos="0 -.1 .05" size=".1 .005 .05"/>
"""


def scene(bodies: str, extra: str = "") -> str:
    return f"""<mujoco><option timestep="0.002"/>
    <worldbody><geom name="floor" type="plane" size="2 2 0.1"/>{bodies}</worldbody>{extra}</mujoco>"""


def simulate(xml: str, seconds: float, control: Control | None = None) -> tuple[list[Event], Recorder]:
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    if model.nkey:
        mujoco.mj_resetDataKeyframe(model, data, 0)
    recorder = Recorder(model, data, robot_prefix="fr3_", model_hash="test")
    for k in range(round(seconds / model.opt.timestep)):
        if control is not None:
            control(k, model, data)
        recorder.step()
    return detect(recorder.close()), recorder


def flagged(events: list[Event]) -> list[str]:
    return [e.body for e in events if e.flagged]


# --- positive controls -------------------------------------------------------------------------------------
def test_boxes_created_overlapping_with_stiff_contact_are_flagged():
    xml = scene(
        """<body name="base" pos="0 0 0.05"><freejoint/>
             <geom type="box" size=".05 .05 .05" mass="0.2" solref="0.004 1"/></body>
           <body name="lid" pos="0 0 0.11"><freejoint/>
             <geom type="box" size=".03 .03 .03" mass="0.1" solref="0.004 1"/></body>"""
    )
    events, _ = simulate(xml, 1.0)
    assert flagged(events) == ["lid"]
    event = events[0]
    assert event.onset_step == 0
    assert event.contact_pair == ("base", "lid")
    assert event.contact_depth > 0.015  # created 2 cm deep
    assert event.peak_speed > 1.0
    assert event.kinetic_energy_gained > 0.05
    assert event.ejection.reason == "free flight"
    assert event.gravity.values["ratio"] > 10


def test_light_box_pressed_into_a_thin_wall_is_flagged():
    xml = scene(
        """<geom name="wall" type="box" pos="0 0 0.1" size=".002 .15 .1" solref="0.004 1"/>
           <body name="box" pos="-0.023 0 0.021"><freejoint/>
             <geom type="box" size=".02 .02 .02" mass="0.01" solref="0.004 1"/></body>
           <body name="fr3_pusher" mocap="true" pos="-0.063 0 0.021">
             <geom type="box" size=".02 .03 .015"/></body>"""
    )

    def press(k: int, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        data.mocap_pos[0, 0] = -0.063 + 0.1 * min(k * model.opt.timestep, 0.6)  # 0.1 m/s into the wall

    events, recorder = simulate(xml, 1.0, press)
    assert flagged(events) == ["box"]
    event = next(e for e in events if e.flagged)
    assert event.peak_speed > 1.0  # ten times the pusher's speed
    assert event.carrier.values["carrier"] == "fr3_pusher"
    assert event.carrier.values["ratio"] > 5
    assert recorder.manifest.roles[recorder.manifest.bodies.index("fr3_pusher")] == "robot"


# --- hard negatives ----------------------------------------------------------------------------------------
def test_box_dropped_into_a_bin_is_not_flagged():
    xml = scene(
        BIN
        + """<body name="box" pos="0.02 0 0.25" euler="20 10 0"><freejoint/>
               <geom type="box" size=".03 .03 .03" mass="0.2"/></body>"""
    )
    events, _ = simulate(xml, 1.2)
    assert flagged(events) == []


def test_box_dropped_on_the_table_from_20_cm_is_not_flagged():
    xml = scene(
        """<body name="box" pos="0 0 0.23" euler="5 10 0"><freejoint/>
             <geom type="box" size=".03 .03 .03" mass="0.2"/></body>"""
    )
    events, recorder = simulate(xml, 1.0)
    assert flagged(events) == []
    assert recorder.recording().speed("box").max() > 1.8  # it did hit the table at about 2 m/s


def test_box_pushed_by_a_robot_link_is_not_flagged():
    xml = scene(
        """<body name="fr3_pusher" pos="-0.1 0 0.03">
             <joint name="slide" type="slide" axis="1 0 0"/>
             <geom type="box" size=".01 .04 .02" mass="1"/></body>
           <body name="box" pos="0 0 0.03"><freejoint/>
             <geom type="box" size=".03 .03 .03" mass="0.2" friction="0.5"/></body>""",
        """<actuator><position joint="slide" kp="3000" kv="100"/></actuator>""",
    )

    def push(k: int, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        data.ctrl[0] = min(0.6 * k * model.opt.timestep, 0.3)  # 0.6 m/s for 0.5 s

    events, recorder = simulate(xml, 1.0, push)
    rec = recorder.recording()
    assert rec.xpos[-1, rec.manifest.body_id("box"), 0] > 0.1  # the box was pushed
    assert flagged(events) == []


def test_box_on_a_tray_shoved_by_a_robot_link_is_not_flagged():
    xml = scene(
        """<body name="fr3_pusher" pos="-0.17 0 0.02">
             <joint name="slide" type="slide" axis="1 0 0"/>
             <geom type="box" size=".01 .1 .015" mass="2"/></body>
           <body name="tray" pos="0 0 0.005"><freejoint/>
             <geom type="box" size=".15 .15 .005" mass="0.5" friction="0.05"/></body>
           <body name="box" pos="0 0 0.04"><freejoint/>
             <geom type="box" size=".03 .03 .03" mass="0.2" friction="1"/></body>""",
        """<actuator><position joint="slide" kp="5000" kv="200"/></actuator>""",
    )

    def shove(k: int, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        data.ctrl[0] = min(2.0 * k * model.opt.timestep, 0.4)  # a 2 m/s shove

    events, recorder = simulate(xml, 1.0, shove)
    assert recorder.recording().speed("box").max() > 1.0  # carried along at the tray's speed
    assert flagged(events) == []
    assert all(e.carrier.reason == "carried by fr3_pusher" for e in events)


def test_ball_rolling_off_a_table_edge_is_not_flagged():
    xml = scene(
        """<geom name="desk" type="box" pos="0 0 0.2" size=".3 .3 .2"/>
           <body name="ball" pos="0.1 0 0.43"><freejoint/>
             <geom type="sphere" size=".03" mass="0.05"/></body>""",
        """<keyframe><key qvel="1.2 0 0 0 40 0"/></keyframe>""",
    )
    events, _ = simulate(xml, 1.8)
    assert flagged(events) == []
    assert [e.gravity.reason for e in events] == ["explained by gravity"] * len(events)
