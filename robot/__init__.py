"""Execution on a Franka (franky) with a RealSense camera: driver, safety checks, calibration, the closed
capture → real2sim → plan → execute → judge loop, and a perturbed stand-in world for sim-to-real."""
