"""Success checks of the task suite: one module per check, each defining
``check(rollout, scene, targets, params) -> simpact.tasks.Evaluation``; a task config names its module in
``success.check``. Checks read simulator state only (the rollout's states and trace)."""
