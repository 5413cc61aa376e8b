"""Execution on a Franka (franky) with a RealSense camera. Empty for now: the driver, camera, calibration
and safety limits arrive with the robot issue."""
