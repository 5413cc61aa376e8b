"""SimuGuard: record every physics step, detect contact artifacts (motion that starts at a contact and that
neither the robot's contact nor gravity accounts for).

- :class:`Recorder` (MuJoCo's recorder: one per engine, MuJoCo today) wraps ``mj_step`` on any MuJoCo
  model/data pair (or a MuJoCo World, through its accessor) without changing it;
- :func:`detect` (engine-free: it reads a recording's arrays) finds contact ejections in a
  :class:`Recording` and judges them in three stages;
- :func:`load_recording` / :func:`save_recording` read and write a recording folder (npz chunks + manifest).

Also: :mod:`simpact.guard.screen` (a conservative first pass over a rollout's own trace, so only rollouts
that could hold an ejection are recorded in full), :mod:`simpact.guard.rerun` (controlled reruns),
:mod:`simpact.guard.settle` (a scene left alone for a second: overlaps, artifacts, motion),
:mod:`simpact.guard.suite` with :mod:`simpact.guard.labels` and :mod:`simpact.guard.energy` (the labelled
suite ``bench audit`` measures :func:`detect` on, labelled by an energy audit the detector does not use).
"""

from simpact.guard.detector import Event, Thresholds, Verdict, detect
from simpact.guard.recorder import Recorder, body_roles, com_velocity, model_hash
from simpact.guard.store import Manifest, Recording, load_recording, save_recording

__all__ = [
    "Event",
    "Manifest",
    "Recorder",
    "Recording",
    "Thresholds",
    "Verdict",
    "body_roles",
    "com_velocity",
    "detect",
    "load_recording",
    "model_hash",
    "save_recording",
]
