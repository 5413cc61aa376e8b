"""Execution on a Franka (franky) with a RealSense camera: driver, camera, calibration, safety limits."""
