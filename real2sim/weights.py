"""Loading model weights for the learned back-ends from local files only.

The learned back-ends (GroundedSAM2, Hunyuan3D) run only when the user chooses them, from weights in folders
named by environment variables. Their libraries may still reach for a model hub while loading (Hunyuan3D's
``from_pretrained``, GroundingDINO's BERT text encoder): :func:`load_local` runs the loader with the Hugging
Face hub switched offline and turns any failure into one line naming the setting to fix.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["OFFLINE_VARIABLES", "hub_offline", "load_local"]

T = TypeVar("T")

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
"""Environment variables that keep Hugging Face libraries from downloading."""


@contextmanager
def hub_offline() -> Iterator[None]:
    """Hugging Face libraries read only their local cache inside this block; the environment is restored
    after it."""
    saved = {name: os.environ.get(name) for name in OFFLINE_VARIABLES}
    os.environ.update({name: "1" for name in OFFLINE_VARIABLES})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def load_local(load: Callable[[], T], what: str, setting: str, error: type[Exception]) -> T:
    """``load()`` with the hub offline; any failure becomes ``error`` naming ``what`` and the ``setting``
    (environment variables) that point at the local weights."""
    with hub_offline():
        try:
            return load()
        except Exception as exc:  # a loader's own errors vary by library and version
            raise error(
                f"{what}: cannot load its weights from the local files named by {setting} "
                f"(nothing is downloaded): {type(exc).__name__}: {exc}"
            ) from None
