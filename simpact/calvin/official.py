"""Back-end choice: the official ``calvin_env`` when it is importable, otherwise the project's rebuild.

:class:`OfficialEnv` gives ``calvin_env.envs.play_table_env.PlayTableSimEnv`` (scene D, Panda with longer
fingers, static and gripper cameras, configured from the package's own ``conf`` folder as its ``get_env``
does) the interface of :class:`simpact.calvin.env.CalvinEnv`, so runners and checks do not care which one
they drive. Users install ``calvin_env`` from its repository; it is never downloaded here.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np

from simpact.calvin.cameras import CameraImage, CameraSpec, render
from simpact.calvin.checks import BlockState, Snapshot
from simpact.calvin.env import CalvinEnv
from simpact.core.errors import SimpactError

__all__ = ["BACKENDS", "OfficialEnv", "make_env", "official_available", "snapshot_from_info"]

#: Accepted values of ``backend``: ``auto`` picks ``official`` when importable, else ``rebuild``.
BACKENDS = ("auto", "official", "rebuild")


def official_available() -> bool:
    """Whether ``calvin_env`` (and Hydra, which configures it) can be imported."""
    return all(importlib.util.find_spec(name) is not None for name in ("calvin_env", "hydra", "omegaconf"))


def make_env(backend: str = "auto") -> CalvinEnv | OfficialEnv:
    """A CALVIN scene D environment of the chosen back-end (its ``backend`` attribute says which)."""
    if backend not in BACKENDS:
        raise SimpactError(f"unknown CALVIN back-end {backend!r}; choose from {', '.join(BACKENDS)}")
    if backend == "official" or (backend == "auto" and official_available()):
        if not official_available():
            raise SimpactError(
                "the official calvin_env is not importable: install it from github.com/mees/calvin_env "
                "(pip install -e .) or use --backend rebuild"
            )
        return OfficialEnv()
    return CalvinEnv()


def _block_color(name: str) -> str:
    return name.removeprefix("block_")


def snapshot_from_info(info: dict[str, Any]) -> Snapshot:
    """A :class:`Snapshot` from ``PlayTableSimEnv.get_info()`` (with ``use_scene_info``)."""
    scene, robot = info["scene_info"], info["robot_info"]
    table = scene["fixed_objects"]["table"]
    blocks = {
        _block_color(name): BlockState(
            uid=int(obj["uid"]),
            pos=tuple(float(v) for v in obj["current_pos"]),  # type: ignore[arg-type]
            quat=tuple(float(v) for v in obj["current_orn"]),  # type: ignore[arg-type]
            lin_vel=tuple(float(v) for v in obj["current_lin_vel"]),  # type: ignore[arg-type]
            ang_vel=tuple(float(v) for v in obj["current_ang_vel"]),  # type: ignore[arg-type]
            contacts=frozenset((int(c[2]), int(c[4])) for c in obj["contacts"]),
        )
        for name, obj in scene["movable_objects"].items()
    }
    return Snapshot(
        robot_uid=int(robot["uid"]),
        table_uid=int(table["uid"]),
        table_links={str(k): int(v) for k, v in table["links"].items()},
        doors={name: float(door["current_state"]) for name, door in scene["doors"].items()},
        lights={name: int(light["logical_state"]) for name, light in scene["lights"].items()},
        blocks=blocks,
        robot_contacts=frozenset((int(c[2]), int(c[4])) for c in robot["contacts"]),
    )


def _official_config() -> Any:
    """The env config ``calvin_env`` would compose for scene D, from the package's own ``conf`` folder."""
    import calvin_env
    from omegaconf import OmegaConf

    root = Path(calvin_env.__file__).resolve().parents[1]
    conf = root / "conf"
    robot = OmegaConf.merge(
        OmegaConf.load(conf / "robot/panda.yaml"), OmegaConf.load(conf / "robot/panda_longer_finger.yaml")
    )
    robot.pop("defaults", None)
    return OmegaConf.create(
        {
            "data_path": str(root / "data"),
            "use_vr": False,
            "cameras": {
                name: OmegaConf.load(conf / f"cameras/cameras/{name}.yaml") for name in ("static", "gripper")
            },
            "robot": robot,
            "scene": OmegaConf.load(conf / "scene/calvin_scene_D.yaml"),
            "env": OmegaConf.load(conf / "env/play_table_env.yaml"),
        }
    )


class OfficialEnv:
    """``calvin_env``'s ``PlayTableSimEnv`` behind :class:`~simpact.calvin.env.CalvinEnv`'s interface."""

    backend = "official"

    def __init__(self) -> None:
        import hydra
        import pybullet

        cfg = _official_config()
        self.pb = pybullet
        self.env = hydra.utils.instantiate(
            cfg.env, show_gui=False, use_vr=False, use_scene_info=True, use_egl=False
        )
        self.cid = int(self.env.cid)
        self.cameras = {
            name: CameraSpec.from_conf(name, dict(cfg.cameras[name])) for name in ("static", "gripper")
        }
        robot = self.env.robot.robot_uid
        links = [
            pybullet.getJointInfo(robot, i, physicsClientId=self.cid)[12].decode()
            for i in range(pybullet.getNumJoints(robot, physicsClientId=self.cid))
        ]
        self._cam_link = links.index("gripper_cam")

    def close(self) -> None:
        """Disconnect once: calvin_env's own ``__del__`` would otherwise disconnect the client id again
        later, when a newer environment may hold it."""
        if self.env.cid >= 0:
            self.env.close()
            self.env.cid = -1

    def __enter__(self) -> OfficialEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reset(self, robot_obs: np.ndarray | None = None, scene_obs: np.ndarray | None = None) -> None:
        self.env.reset(robot_obs=robot_obs, scene_obs=scene_obs)

    def step(self, action: np.ndarray, relative: bool = False) -> None:
        """An absolute (position, euler, gripper) or relative (7 values in [-1, 1]) action, as calvin_env."""
        a = np.asarray(action, dtype=float).reshape(-1)
        if a.shape != (7,):
            raise SimpactError(f"a CALVIN action has 7 values, got {a.shape[0]}")
        gripper = 1 if a[6] > 0 else -1
        self.env.step(np.r_[a[:6], gripper] if relative else (a[:3], a[3:6], gripper))

    def robot_obs(self) -> np.ndarray:
        return np.asarray(self.env.get_state_obs()["robot_obs"])

    def scene_obs(self) -> np.ndarray:
        return np.asarray(self.env.get_state_obs()["scene_obs"])

    def render(self, name: str = "static") -> CameraImage:
        if name not in self.cameras:
            raise SimpactError(f"no CALVIN camera {name!r}; choose from {sorted(self.cameras)}")
        return render(self.pb, self.cid, self.cameras[name], self.env.robot.robot_uid, self._cam_link)

    def snapshot(self) -> Snapshot:
        return snapshot_from_info(self.env.get_info())
