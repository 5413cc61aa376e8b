"""CALVIN's data files: where they are, the 1000 evaluation chains, the task table and the instructions.

The files are the official ones (``../shared/data/calvin``, see its README), read in place. Nothing here
needs PyBullet.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simpact.core.errors import SimpactError

__all__ = [
    "CALVIN_DATA_ENV",
    "EP_LEN",
    "SUBTASKS",
    "CalvinDataMissing",
    "Chain",
    "calvin_data_dir",
    "instructions",
    "load_chains",
    "scene_config",
    "task_table",
]

#: Environment variable naming the CALVIN data folder (default ``<repo root>/../shared/data/calvin``).
CALVIN_DATA_ENV = "SIMPACT_CALVIN_DATA"
#: Control steps per subtask in the long-horizon evaluation (12 s at 30 Hz).
EP_LEN = 360

_TASKS_YAML = "calvin/calvin_models/conf/callbacks/rollout/tasks/new_playtable_tasks.yaml"
_ANNOTATIONS_YAML = "calvin/calvin_models/conf/annotations/new_playtable_validation.yaml"


class CalvinDataMissing(SimpactError, FileNotFoundError):
    """The CALVIN data folder or a file in it is absent; the message names the setting to change."""


def calvin_data_dir(*parts: str) -> Path:
    """The CALVIN data folder (or ``parts`` inside it).

    Looks at ``$SIMPACT_CALVIN_DATA``, then ``$SIMPACT_SHARED_DATA/calvin``, then
    ``<repo root>/../shared/data/calvin``; raises :class:`CalvinDataMissing` naming the setting.
    """
    if os.environ.get(CALVIN_DATA_ENV):
        root = Path(os.environ[CALVIN_DATA_ENV])
    elif os.environ.get("SIMPACT_SHARED_DATA"):
        root = Path(os.environ["SIMPACT_SHARED_DATA"]) / "calvin"
    else:
        root = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "calvin"
    path = root.joinpath(*parts)
    if not path.exists():
        raise CalvinDataMissing(
            f"CALVIN data {path} not found; set ${CALVIN_DATA_ENV} to the calvin data folder"
        )
    return path


@dataclass(frozen=True)
class Chain:
    """One evaluation chain: five subtasks from one start state.

    ``robot_obs`` (15): TCP position (m), TCP euler xyz (rad), gripper opening width (m), 7 arm joints (rad),
    gripper action (±1). ``scene_obs`` (24): slider, drawer (m), button, switch (m), lightbulb, LED (0/1),
    then the red, blue and pink block poses (position m, euler xyz rad).
    """

    index: int
    sequence: tuple[str, ...]
    initial_state: dict[str, Any]
    robot_obs: np.ndarray
    scene_obs: np.ndarray


@lru_cache(maxsize=2)
def _read_chains(path: str) -> tuple[Chain, ...]:
    raw = json.loads(Path(path).read_text())
    entries = raw["sequences"] if isinstance(raw, dict) else raw
    return tuple(
        Chain(
            index=i,
            sequence=tuple(entry["sequence"]),
            initial_state=dict(entry["initial_state"]),
            robot_obs=np.asarray(entry["robot_obs"], dtype=float),
            scene_obs=np.asarray(entry["scene_obs"], dtype=float),
        )
        for i, entry in enumerate(entries)
    )


def load_chains(start: int = 0, count: int | None = None, path: Path | None = None) -> list[Chain]:
    """Chains ``start .. start+count-1`` of ``eval_sequences_1000.json`` in the official order."""
    chains = _read_chains(str(path or calvin_data_dir("eval_sequences_1000.json")))
    if not 0 <= start < len(chains):
        raise SimpactError(f"chain start {start} is outside 0..{len(chains) - 1}")
    stop = len(chains) if count is None else min(len(chains), start + count)
    return list(chains[start:stop])


@lru_cache(maxsize=1)
def task_table() -> dict[str, tuple[str, tuple[Any, ...]]]:
    """The official task oracle table: subtask name → (check family, its arguments), in file order."""
    tasks = yaml.safe_load(calvin_data_dir(_TASKS_YAML).read_text())["tasks"]
    return {name: (str(args[0]), tuple(args[1:])) for name, args in tasks.items()}


#: The 34 subtasks of the evaluation, in the task file's order (read lazily by :func:`task_table`).
SUBTASKS: tuple[str, ...] = (
    *(f"rotate_{c}_block_{d}" for c in ("red", "blue", "pink") for d in ("right", "left")),
    *(f"push_{c}_block_{d}" for c in ("red", "blue", "pink") for d in ("right", "left")),
    "move_slider_left",
    "move_slider_right",
    "open_drawer",
    "close_drawer",
    *(f"lift_{c}_block_{s}" for c in ("red", "blue", "pink") for s in ("table", "slider", "drawer")),
    "place_in_slider",
    "place_in_drawer",
    "stack_block",
    "unstack_block",
    "turn_on_lightbulb",
    "turn_off_lightbulb",
    "turn_on_led",
    "turn_off_led",
    "push_into_drawer",
)


@lru_cache(maxsize=1)
def instructions() -> dict[str, str]:
    """Subtask → the first instruction for it in the validation annotations (what the evaluation says)."""
    table = yaml.safe_load(calvin_data_dir(_ANNOTATIONS_YAML).read_text())
    return {name: str(texts[0]) for name, texts in table.items()}


def _yaml(*parts: str) -> dict[str, Any]:
    return dict(yaml.safe_load(calvin_data_dir("calvin_env", "conf", *parts).read_text()))


@lru_cache(maxsize=1)
def scene_config(scene: str = "calvin_scene_D") -> dict[str, Any]:
    """The scene, robot, camera and env configuration of ``calvin_env/conf`` merged into one plain dict.

    Keys: ``scene`` (the scene yaml), ``robot`` (``panda`` overridden by ``panda_longer_finger``),
    ``cameras`` (``static`` and ``gripper``), ``env`` (``play_table_env``).
    """
    robot = _yaml("robot", "panda.yaml")
    robot.update({k: v for k, v in _yaml("robot", "panda_longer_finger.yaml").items() if k != "defaults"})
    cameras = {name: _yaml("cameras", "cameras", f"{name}.yaml") for name in ("static", "gripper")}
    return {
        "scene": _yaml("scene", f"{scene}.yaml"),
        "robot": robot,
        "cameras": cameras,
        "env": _yaml("env", "play_table_env.yaml"),
    }
