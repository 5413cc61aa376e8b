"""``simpact plan --rerun``: a session logged to a Rerun recording (.rrd), from real non_toppling_push
rollouts."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util

import pytest

from simpact.cli.plan import add_parsers as add_plan_parser
from simpact.core.actions import Plan
from simpact.planner.records import PlanResult, Proposal

needs_rerun = pytest.mark.skipif(
    importlib.util.find_spec("rerun") is None, reason="rerun-sdk is not installed (pip install rerun-sdk)"
)

PLANS = [
    [{"type": "LIFT", "dz": 0.03}],
    [{"type": "DESCEND", "dz": 0.2}, {"type": "PUSH", "dx": 0.05, "dy": 0.0}],
]


@pytest.fixture(scope="module")
def result(push_world):
    task, scene, world, _ = push_world
    proposals = []
    for i, actions in enumerate(PLANS):
        rollout = world.rollout(Plan.from_dict({"actions": actions}), tail_s=0.2)
        evaluation = task.evaluate(rollout, scene, 0)
        proposals.append(Proposal(rollout.plan, rollout, evaluation, iteration=i, source=f"test/{i}"))
    best = max(range(len(proposals)), key=lambda k: proposals[k].score)
    return PlanResult(task.name, 0, proposals, None, best, wall_s=1.0, vlm=None, iterations=2, method="test")


def _entities_and_timelines(path):
    from rerun.chunk import RrdReader

    entities: set[str] = set()
    timelines: set[str] = set()
    for chunk in RrdReader(path).stream().to_chunks():
        entities.add(chunk.entity_path)
        timelines.update(chunk.timeline_names)
    return entities, timelines


@needs_rerun
def test_log_session_writes_a_readable_recording(push_world, result, tmp_path):
    from simpact.planner.rerun_log import log_session

    _, scene, _, _ = push_world
    out = log_session(result, scene, tmp_path / "rec" / "session.rrd")
    assert out == tmp_path / "rec" / "session.rrd"
    assert out.is_file() and out.stat().st_size > 10_000
    entities, timelines = _entities_and_timelines(out)
    expected = {"/world/table", "/session", "/scores/score"}
    for i in range(len(PLANS)):
        root = f"/world/proposals/{i:03d}"
        expected |= {
            f"{root}/tool",
            f"{root}/tool_path",
            f"{root}/end_states/tool",
            f"/proposals/{i:03d}/summary",
        }
        expected |= {f"{root}/objects/{o.name}" for o in scene.objects}
        expected |= {f"{root}/objects/{o.name}/shape" for o in scene.objects}
    assert expected <= entities, sorted(expected - entities)
    assert {"proposal", "sim_time"} <= timelines


@needs_rerun
def test_log_session_without_a_trace(push_world, result, tmp_path):
    """Rollouts run with trace=False are logged from their end-of-action states."""
    from simpact.planner.rerun_log import log_session

    _, scene, _, _ = push_world
    bare = [
        dataclasses.replace(p, rollout=dataclasses.replace(p.rollout, trace=None)) for p in result.proposals
    ]
    out = log_session(dataclasses.replace(result, proposals=bare), scene, tmp_path / "bare.rrd")
    entities, _ = _entities_and_timelines(out)
    assert (
        "/world/proposals/001/objects/carton" in entities
        and "/world/proposals/001/end_states/tool" in entities
    )


def test_missing_rerun_names_the_install(monkeypatch):
    import sys

    from simpact.planner import rerun_log

    monkeypatch.setitem(sys.modules, "rerun", None)
    with pytest.raises(ImportError, match="pip install rerun-sdk"):
        rerun_log._import_rerun()


def test_plan_parser_has_rerun_flag():
    parser = argparse.ArgumentParser()
    add_plan_parser(parser.add_subparsers(dest="verb"))
    assert parser.parse_args(["plan", "non_toppling_push", "--out", "x", "--rerun"]).rerun is True
    assert parser.parse_args(["plan", "non_toppling_push", "--out", "x"]).rerun is False
