"""Shared pytest set-up."""

import os

# MuJoCo picks its GL backend when first imported: render offscreen (EGL works on CPU via Mesa).
os.environ.setdefault("MUJOCO_GL", "egl")
