"""From one RGB-D frame to a simulation scene. ``real2sim.frame``: the frame bundle format and its checks."""
