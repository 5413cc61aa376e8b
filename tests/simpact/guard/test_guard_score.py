"""The scores of SimuGuard §3.6 on hand-made episodes."""

import pytest

from simpact.guard.score import ScoredEpisode, score


def test_scores_on_hand_made_numbers():
    eps = [ScoredEpisode(f"ok{i}", True, False) for i in range(5)]
    eps += [ScoredEpisode("fail", False, False)]
    eps += [
        ScoredEpisode("f1", False, True, True),
        ScoredEpisode("f2", False, True, False),
        ScoredEpisode("f3", True, True, True),
    ]
    eps += [ScoredEpisode("f4", True, True, False)]
    s = score(eps)  # N = 10, S = 7, A = {f1..f4} with y = 0, 0, 1, 1 and r = 1, 0, 1, 0
    assert (s.episodes, s.successes, s.flagged) == (10, 7, 4)
    assert s.reported == pytest.approx(0.7)
    assert s.excluded == pytest.approx(5 / 6)
    assert s.replay == pytest.approx((7 + (1 - 0) + 0 + 0 + (0 - 1)) / 10)
    assert (s.low, s.high) == (pytest.approx(0.5), pytest.approx(0.9))


def test_missing_reruns_and_no_clean_episode():
    s = score([ScoredEpisode("a", False, True), ScoredEpisode("b", True, True, True)])
    assert s.replay is None and s.missing_reruns == ["a"] and s.excluded is None
    assert (s.low, s.high) == (0.0, 1.0)
    with pytest.raises(ValueError):
        score([])
