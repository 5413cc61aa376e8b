"""Worlds behind one interface: build from a Scene, ``snapshot()``/``restore()`` exactly, ``rollout(plan)``.

``solvers.mujoco`` holds the robot and rigid objects; what a rollout returns is in ``simpact.core.rollout``.
"""
