"""MuJoCo: the FR3 with the Franka hand, rigid objects, rollouts and offscreen rendering.

Import the submodules: ``world`` (MujocoWorld), ``scene_builder``, ``robot``, ``ik``, ``meshes``, ``render``,
``playback``.
"""
