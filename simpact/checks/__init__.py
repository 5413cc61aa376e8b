"""Python success checks, for tasks whose goal the YAML predicates (``simpact.goals``) cannot state: one
module per check, each defining ``check(rollout, scene, targets, params) -> simpact.tasks.Evaluation``; a
task config names its module in ``success.check`` (``simpact.tasks.load_check``; a task outside the package
may name its own module or file). ``common`` holds quantities several checks share. Checks read core types
only (``simpact.core``: the rollout's states and trace, the scene), never a solver."""
