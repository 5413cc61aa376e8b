"""From one RGB-D frame to a simulation scene (the frame bundle format: ``simpact.core.frame``)."""
