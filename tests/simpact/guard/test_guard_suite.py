"""SimuGuard's labelled suite: seeded task-scene episodes, disjoint splits, labels from energies."""

import numpy as np
import pytest

from simpact.guard.labels import label, simulate
from simpact.guard.suite import CYCLE, FAMILIES, SPLITS, episode, fixed_episode, split_seeds

OVERLAP, DROP, KICK = 0, 14, 23  # CYCLE[seed % 24]


def test_episodes_are_seeded_and_every_family_is_in_the_cycle():
    assert set(CYCLE) == set(FAMILIES) and len(CYCLE) == 24
    a, b = episode(OVERLAP), episode(OVERLAP)
    assert a.to_dict() == b.to_dict() and a.scene == b.scene
    assert episode(OVERLAP + 24).family == "overlap" and episode(OVERLAP + 24).params != a.params
    assert [episode(s).family for s in (DROP, KICK)] == ["drop", "kick"]


def test_dev_and_eval_have_disjoint_seeds_and_main_parameter_bands():
    dev, ev = split_seeds("dev", 200), split_seeds("eval", 200)
    assert not set(dev) & set(ev) and ev[0] == SPLITS["eval"]
    with pytest.raises(ValueError, match="unknown split"):
        split_seeds("test", 3)
    for seeds, parity in ((dev[:96:24], 0), (ev[:96:24], 1)):  # overlap depth in [1, 4] cm, four bands
        for s in seeds:
            ep = episode(s)
            assert ep.family == "overlap" and ep.split == ("eval" if parity else "dev")
            band = int((ep.params["overlap"] - 0.01) / 0.03 * 4)
            assert band % 2 == parity


def test_the_fixed_draw_removes_the_overlap():
    ep = episode(OVERLAP)
    fixed = fixed_episode(ep)
    assert fixed.fixed and fixed.params == ep.params and fixed.scene != ep.scene
    assert fixed_episode(episode(DROP)) == episode(DROP)  # a drop's rerun takes a smaller step instead


def test_an_overlap_is_labelled_an_artifact_and_the_detector_flags_it():
    run = simulate(episode(OVERLAP))
    lab = label(run)
    assert lab["label"] == "artifact" and lab["rerun"]["change"] == "cause removed (fixed draw)"
    assert lab["energy"]["speed_equivalent"] > 1.0 > lab["rerun"]["energy"]["speed_equivalent"]
    first = run.recording.contacts(0)
    assert run.recording.contact_depth[first].max() > 0.01  # created overlapping
    assert any(e.flagged and e.body == lab["energy"]["body"] for e in run.events)
    assert run.screen.suspicious


def test_a_drop_is_clean_and_a_kick_is_external():
    drop = simulate(episode(DROP))
    assert label(drop)["label"] == "clean" and not any(e.flagged for e in drop.events)
    assert drop.recording.xpos[0, :, 2].max() > drop.recording.xpos[-1, :, 2].max()  # it did fall
    kick = simulate(episode(KICK))
    assert label(kick)["label"] == "external"
    assert np.isfinite(kick.gain.gain) and kick.gain.speed > 0.5  # the audit sees the impulse's energy
