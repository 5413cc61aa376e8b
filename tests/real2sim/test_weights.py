"""Learned back-ends load weights from local files only, and name the setting to fix when they cannot."""

import os

import pytest

from real2sim.shape import ShapeError
from real2sim.weights import OFFLINE_VARIABLES, hub_offline, load_local


def test_the_hub_is_offline_while_loading_and_restored_after(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    with hub_offline():
        assert all(os.environ[name] == "1" for name in OFFLINE_VARIABLES)
    assert os.environ["HF_HUB_OFFLINE"] == "0" and "TRANSFORMERS_OFFLINE" not in os.environ


def test_a_failed_load_names_the_setting():
    def load():
        assert os.environ["HF_HUB_OFFLINE"] == "1"  # the loader sees the hub offline
        raise OSError("We couldn't connect to 'https://huggingface.co' to load this model")

    with pytest.raises(ShapeError, match=r"\$SIMPACT_HUNYUAN3D_PATH.*nothing is downloaded.*OSError"):
        load_local(load, "shape back-end 'hunyuan3d'", "$SIMPACT_HUNYUAN3D_PATH", ShapeError)
    assert load_local(lambda: 42, "x", "$X", ShapeError) == 42
