"""The energy audit that labels SimuGuard's suite: no gain without a cause, a gain from an overlap."""

import mujoco
import numpy as np

from simpact.guard.energy import EnergyAudit

SCENE = """<mujoco><option timestep="0.002"/><worldbody><geom type="plane" size="1 1 .1"/>
  <body name="ball" pos="0 0 {z}"><freejoint/>
  <geom type="sphere" size=".03" mass=".1" solref="{tc} 1"/></body>
  </worldbody></mujoco>"""


def audit(z: float, tc: float = 0.02, steps: int = 500, spin: bool = False) -> EnergyAudit:
    model = mujoco.MjModel.from_xml_string(SCENE.format(z=z, tc=tc))
    data = mujoco.MjData(model)
    if spin:
        data.qvel[:] = [1.0, 0.0, 2.0, 20.0, -5.0, 3.0]
    energy = EnergyAudit(model, ["static", "object"])
    for _ in range(steps):
        mujoco.mj_step(model, data)
        energy.after_step(data)
    return energy


def test_free_flight_and_a_landing_create_no_energy():
    flight = audit(2.0, steps=200, spin=True)  # spinning and falling: kinetic + potential is constant
    u = flight.unexplained()
    assert np.ptp(u) < 0.01 * abs(u[0]) and flight.gain().gain == 0.0  # the integrator only loses energy
    landing = audit(0.3)  # falls 27 cm, lands, settles: energy only goes
    assert landing.gain().gain < 1e-4


def test_an_overlap_resolved_in_one_go_creates_energy():
    gain = audit(
        0.0, tc=0.002
    ).gain()  # created 3 cm deep in the floor (to its centre), stiff contact: thrown up
    assert gain.body == "ball" and gain.gain > 0.01
    assert gain.speed > 1.0 and gain.step < 20
    assert gain.to_dict()["speed_equivalent"] == round(gain.speed, 4)


def test_the_audit_is_deterministic():
    a, b = audit(0.0, tc=0.002).unexplained(), audit(0.0, tc=0.002).unexplained()
    assert np.array_equal(a, b)
