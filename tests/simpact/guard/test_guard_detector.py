"""The SimuGuard detector's three stages on synthetic recordings (no simulator involved)."""

import numpy as np
import pytest

from simpact.guard import Manifest, Recording, Thresholds, detect

G = 9.81


def recording(
    vel: np.ndarray,
    contacts: list[tuple[int, int, int]],
    roles: list[str],
    dt: float = 0.002,
    z0: float = 0.0,
) -> Recording:
    """Bodies moving with ``vel`` (n, nb, 3) from z = ``z0`` (pos integrated from vel); ``contacts`` lists
    (step, body, body) pairs in contact."""
    n, nb, _ = vel.shape
    pos = np.concatenate([np.zeros((1, nb, 3)), np.cumsum(vel[:-1] * dt, axis=0)]) + [0.0, 0.0, z0]
    contacts = sorted({(s, min(a, b), max(a, b)) for s, a, b in contacts})
    steps = np.array([c[0] for c in contacts], dtype=np.int64)
    names = ["world"] + [f"body{i}" for i in range(1, nb)]
    manifest = Manifest(names, roles, [0.5] * nb, dt, thresholds=Thresholds().to_dict())
    return Recording(
        manifest,
        time=np.arange(n) * dt,
        xpos=pos,
        xquat=np.tile([1.0, 0, 0, 0], (n, nb, 1)),
        vel=vel,
        contact_start=np.searchsorted(steps, np.arange(n + 1)),
        contact_bodies=np.array([c[1:] for c in contacts], dtype=np.int32).reshape(-1, 2),
        contact_impulse=np.full(len(contacts), 0.01),
        contact_depth=np.full(len(contacts), 0.002),
    )


def test_an_object_ejected_from_rest_at_a_contact_is_flagged():
    n, onset = 400, 100
    vel = np.zeros((n, 2, 3))
    vel[onset + 1 :, 1, 2] = 3.0 - G * 0.002 * np.arange(n - onset - 1)  # thrown up at 3 m/s, then falls
    contacts = [(s, 0, 1) for s in range(onset + 1)]
    events = detect(recording(vel, contacts, ["static", "object"]))
    assert len(events) == 1
    e = events[0]
    assert e.flagged and e.body == "body1" and e.onset_step == onset
    assert e.onset_s == pytest.approx(0.2)
    assert e.peak_speed == pytest.approx(3.0)
    assert e.kinetic_energy_gained == pytest.approx(0.5 * 0.5 * 9.0)
    assert e.contact_pair == ("world", "body1") and e.contact_depth == 0.002
    assert e.ejection.reason == "free flight" and e.carrier.reason == "no carrier"
    assert e.to_dict()["stages"]["gravity"]["passed"] is True


def test_a_drop_that_bounces_is_explained_by_gravity():
    dt, n = 0.002, 700
    t_hit = np.sqrt(2 * 0.5 / G)
    hit = int(round(t_hit / dt))
    vz = np.zeros(n)
    vz[: hit + 1] = -G * dt * np.arange(hit + 1)
    vz[hit + 1 :] = 0.5 * G * t_hit - G * dt * np.arange(n - hit - 1)  # bounces up at half the speed
    vel = np.zeros((n, 2, 3))
    vel[:, 1, 2] = vz
    events = detect(recording(vel, [(hit, 0, 1)], ["static", "object"], z0=0.5))
    assert len(events) == 1
    e = events[0]
    assert e.ejection.passed and not e.flagged
    assert e.gravity.reason == "explained by gravity"
    assert e.gravity.values["drop"] == pytest.approx(0.5, abs=0.01)
    assert e.gravity.values["ratio"] == pytest.approx(1.0, abs=0.05)


def test_an_object_carried_by_a_pushed_body_is_discarded():
    # body1: robot link pushing body2 (a tray) at 0.9 m/s; body3 rides the tray and hops off at 1.0 m/s.
    n, onset = 300, 100
    vel = np.zeros((n, 4, 3))
    vel[:, 1, 0] = vel[:, 2, 0] = 0.9
    vel[: onset + 1, 3, 0] = 0.9
    vel[onset + 1 :, 3] = [0.9, 0.0, 0.0] + np.outer(0.4 - G * 0.002 * np.arange(n - onset - 1), [0, 0, 1])
    contacts = [(s, 1, 2) for s in range(n)] + [(s, 2, 3) for s in range(onset + 1)]
    paper = Thresholds(
        own_motion=False
    )  # the hop is explained by the box's own motion too: isolate the stage
    events = detect(recording(vel, contacts, ["static", "robot", "object", "object"]), paper)
    assert [e.body for e in events] == ["body3"]
    e = events[0]
    assert e.ejection.passed and e.gravity.passed and not e.flagged
    assert e.carrier.values["carrier"] == "body2"
    assert e.carrier.values["carrier_speed"] == pytest.approx(0.9)
    # the same hop off a tray nobody pushes is an artifact
    still = vel.copy()
    still[:, 1:3] = 0.0
    still[: onset + 1, 3] = 0.0
    contacts = [(s, 2, 3) for s in range(onset + 1)]
    assert [
        e.flagged for e in detect(recording(still, contacts, ["static", "robot", "object", "object"]))
    ] == [True]


def test_a_jolt_that_goes_nowhere_is_not_an_event():
    n = 200
    vel = np.zeros((n, 2, 3))
    vel[51:56, 1, 0] = 2.0  # 1 cm in 10 ms, then stopped
    assert detect(recording(vel, [(s, 0, 1) for s in range(n)], ["static", "object"])) == []


def test_without_a_recent_contact_there_is_no_candidate():
    n = 300
    vel = np.zeros((n, 2, 3))
    vel[101:, 1, 0] = 3.0
    assert detect(recording(vel, [(s, 0, 1) for s in range(70)], ["static", "object"])) == []  # 60 ms ago
    assert len(detect(recording(vel, [(s, 0, 1) for s in range(90)], ["static", "object"]))) == 1


def test_robot_links_are_never_candidates():
    n = 300
    vel = np.zeros((n, 2, 3))
    vel[101:, 1, 2] = 3.0
    contacts = [(s, 0, 1) for s in range(101)]
    assert detect(recording(vel, contacts, ["static", "robot"])) == []


@pytest.mark.parametrize("dt", [0.001, 0.002, 0.004])
@pytest.mark.parametrize("dv_per_4ms, expected", [(0.3, 0), (0.4, 1)])
def test_velocity_change_threshold_scales_with_the_physics_step(dt, dv_per_4ms, expected):
    n = round(0.6 / dt)
    onset = round(0.1 / dt)
    accel = dv_per_4ms / 0.004  # the same acceleration whatever the step
    vz = np.zeros(n)
    ramp = np.arange(1, n - onset) * accel * dt
    vz[onset + 1 :] = np.minimum(ramp, 3.0)
    vel = np.zeros((n, 2, 3))
    vel[:, 1, 0] = vz
    contacts = [(s, 0, 1) for s in range(onset + 1)]  # free of contacts after onset
    assert len(detect(recording(vel, contacts, ["static", "object"], dt=dt))) == expected


def test_the_landing_of_an_ejected_object_is_a_consequence_not_a_second_artifact():
    n, onset, land = 600, 100, 250
    vel = np.zeros((n, 2, 3))
    vel[onset + 1 : land + 1, 1, 0] = 3.0  # ejected sideways at 3 m/s, flies
    vel[land + 1 : land + 40, 1, 0] = 1.5  # hits the floor, skids on
    contacts = [(s, 0, 1) for s in range(onset + 1)] + [(s, 0, 1) for s in range(land, land + 40)]
    events = detect(recording(vel, contacts, ["static", "object"], z0=0.3))
    flagged = [e for e in events if e.flagged]
    assert [e.onset_step for e in flagged] == [onset]
    after = [e for e in events if not e.flagged]
    assert all(e.consequence_of == onset for e in after)
    assert all(e.to_dict()["consequence_of"] == onset for e in after)


def test_own_motion_explains_a_fast_body_deflected_at_a_contact():
    n, hit = 400, 100
    vel = np.zeros((n, 2, 3))
    vel[: hit + 1, 1, 0] = 4.0  # thrown at 4 m/s (no drop), deflected sideways at a contact, same speed
    vel[hit + 1 :, 1, 1] = 4.0
    contacts = [(hit, 0, 1)]
    rec = recording(vel, contacts, ["static", "object"], z0=0.2)
    events = detect(rec)
    assert events and not any(e.flagged for e in events)
    assert events[0].gravity.values["explained_speed"] == pytest.approx(4.0)
    paper = detect(rec, Thresholds(own_motion=False))  # the paper's gravity stage: free fall from rest only
    assert any(e.flagged for e in paper)
