"""Shared pytest set-up."""

import os

# MuJoCo picks its GL backend when first imported: render offscreen (EGL works on CPU via Mesa).
os.environ.setdefault("MUJOCO_GL", "egl")

# Fit each frame's objects in the test's own process: pytest-xdist already keeps every CPU busy, and a pool
# of fitting processes per test worker would only compete with it (tests/real2sim/test_workers.py sets 2).
os.environ.setdefault("SIMPACT_REAL2SIM_WORKERS", "1")
