"""Scoring over a set of audited episodes (SimuGuard §3.6).

With ``N`` episodes, ``S`` successes as run, ``A`` the episodes with a flagged artifact, ``y_e`` an
episode's outcome as run and ``r_e`` its outcome in the rerun:

- reported: ``S / N``;
- exclusion: the success rate over the episodes without an artifact;
- replay estimate: ``s_hat = (S + sum_{e in A} (r_e - y_e)) / N`` (None while a flagged episode has no rerun);
- range: ``[(S - sum_A y_e) / N, (S + sum_A (1 - y_e)) / N]``: every flagged episode fails, or passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["ScoredEpisode", "Scores", "score"]


@dataclass(frozen=True)
class ScoredEpisode:
    """One episode as scored: its outcome, whether it is flagged, and its rerun's outcome."""

    name: str
    success: bool
    """Outcome as run (y_e)."""
    flagged: bool
    """The episode contains a flagged contact artifact (e in A)."""
    rerun_success: bool | None = None
    """Outcome of the rerun (r_e); needed for flagged episodes only."""


@dataclass(frozen=True)
class Scores:
    episodes: int
    successes: int
    flagged: int
    reported: float
    excluded: float | None
    replay: float | None
    low: float
    high: float
    missing_reruns: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score(episodes: Sequence[ScoredEpisode]) -> Scores:
    """The four scores of §3.6 over ``episodes`` (see the module docstring)."""
    n = len(episodes)
    if n == 0:
        raise ValueError("no episodes to score")
    s = sum(e.success for e in episodes)
    flagged = [e for e in episodes if e.flagged]
    clean = [e for e in episodes if not e.flagged]
    missing = [e.name for e in flagged if e.rerun_success is None]
    replay = None
    if not missing:
        replay = (s + sum(int(bool(e.rerun_success)) - int(e.success) for e in flagged)) / n
    y_a = sum(e.success for e in flagged)
    return Scores(
        episodes=n,
        successes=s,
        flagged=len(flagged),
        reported=s / n,
        excluded=sum(e.success for e in clean) / len(clean) if clean else None,
        replay=replay,
        low=(s - y_a) / n,
        high=(s + len(flagged) - y_a) / n,
        missing_reruns=missing,
    )
