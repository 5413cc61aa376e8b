"""Layer 1, the shared vocabulary: scenes, plans and actions, trajectories, rotations, expressions, frame
bundles, rollout and state types, JSON I/O, the error base and the vocabularies. It imports nothing else of
the project."""
