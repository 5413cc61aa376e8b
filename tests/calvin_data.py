"""Skipping the tests that read the CALVIN data where it is absent (a fresh clone without the shared data),
as the real-frame tests skip without the real frames; the reason names the setting."""

from __future__ import annotations

import pytest

from simpact.calvin.data import CalvinDataMissing, calvin_data_dir


def calvin_data_missing() -> str | None:
    """Why the CALVIN data cannot be read (the message naming the setting), or None when it is there."""
    try:
        calvin_data_dir()
    except CalvinDataMissing as exc:
        return str(exc)
    return None


_MISSING = calvin_data_missing()
needs_calvin_data = pytest.mark.skipif(_MISSING is not None, reason=f"CALVIN data absent: {_MISSING}")
"""Mark a test (or, as ``pytestmark``, a module) that reads the CALVIN data."""
