"""CALVIN (LH-MTLC) on scene D: the environment, its 34 subtask checks and the evaluation chains.

Two back-ends: the official ``calvin_env`` when it is importable, otherwise this package's own rebuild of
scene D in PyBullet from the shared data files (:mod:`simpact.calvin.env`). PyBullet is optional (the
``calvin`` extra) and imported inside functions only. Every result names the back-end that produced it.
"""
