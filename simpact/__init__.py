"""SIMPACT: plan physically demanding manipulation by thinking in simulation.

The planner and the product's entry points: symbolic actions and plans (``simpact.core.actions``), waypoint
expansion (``simpact.core.trajectory``), scenes (``simpact.core.scene``), the task suite (``simpact.tasks``),
benchmarks and the ``simpact`` command. Heavy dependencies load lazily, inside the modules that need them.
"""

__version__ = "0.1.0"
