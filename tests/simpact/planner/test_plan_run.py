"""`simpact plan` loses nothing and reports honestly: written as it goes, interrupted and resumed without
redoing finished work, a failed VLM service stops the run (exit 4), a used folder is refused, and
``success`` is the accepted plan's outcome."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

import simpact.cli.plan as cli_plan
import simpact.planner.session as session
from simpact.cli import main
from simpact.core.errors import ServiceError
from simpact.planner.offline import plan_offline
from simpact.planner.report import RunWriter

SEED = "1"  # CEM with populations of 4 solves non_toppling_push seed 1 in 16 rollouts (~7 s)
PLAN = ["plan", "non_toppling_push", "--seed", SEED, "--planner", "cem", "--no-video"]


@pytest.fixture
def small_cem(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Offline planning with populations of 4; returns the list of simulated batch sizes."""
    simulated: list[int] = []

    def planner(task: Any, scene: Any, world: Any, seed: int, **kw: Any) -> Any:
        simulate = world.rollouts

        def counted(plans: Any, **options: Any) -> Any:  # counts the plans simulated
            simulated.append(len(plans))
            return simulate(plans, **options)

        world.rollouts = counted
        return plan_offline(task, scene, world, seed, population=4, **kw)

    monkeypatch.setattr(session, "plan_offline", functools.partial(planner))
    return simulated


def _result(out: Path) -> dict[str, Any]:
    return json.loads((out / "result.json").read_text())


def _actions(plan: dict[str, Any]) -> list[Any]:
    """A plan's actions (its start pose can differ in the last bit between two worlds of one scene)."""
    return plan["actions"]


def _same_outcome(a: dict[str, Any], b: dict[str, Any]) -> None:
    for key in ("success", "accepted", "best", "score", "rollouts", "iterations"):
        assert a[key] == b[key], key
    assert _actions(a["plan"]) == _actions(b["plan"])
    assert [(p["source"], _actions(p["plan"]), p["score"]) for p in a["proposals"]] == [
        (p["source"], _actions(p["plan"]), p["score"]) for p in b["proposals"]
    ]


def test_interrupted_plan_resumes_without_redoing_work(tmp_path, small_cem, monkeypatch, capsys):
    reference = tmp_path / "whole"
    assert main([*PLAN, "--out", str(reference)]) == 0
    whole = _result(reference)
    assert whole["status"] == "done" and whole["success"] is True and "resumed" not in whole
    small_cem.clear()

    out = tmp_path / "run"
    write = RunWriter.proposal

    def stop_after_three(self: RunWriter, index: int, p: Any) -> None:
        write(self, index, p)
        if index == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(RunWriter, "proposal", stop_after_three)
    assert main([*PLAN, "--out", str(out)]) == 130
    assert "interrupted; what finished is in" in capsys.readouterr().err
    partial = _result(out)
    assert partial["status"] == "interrupted" and partial["rollouts"] == 3 and partial["success"] is False
    assert sorted(f.name for f in (out / "proposals").iterdir()) == ["000", "001", "002"]
    assert all((out / "proposals" / n / "rollout.json").is_file() for n in ("000", "001", "002"))
    assert "interrupted" in (out / "report.md").read_text()

    monkeypatch.setattr(RunWriter, "proposal", write)
    assert main([*PLAN, "--out", str(out)]) == 2  # a used folder needs --resume or --overwrite
    small_cem.clear()
    assert main([*PLAN, "--out", str(out), "--resume"]) == 0
    done = _result(out)
    assert done["status"] == "done" and done["resumed"] == {"proposals": 3, "exchanges": 0}
    _same_outcome(done, whole)
    assert sum(small_cem) == whole["rollouts"] - 3  # the three finished proposals were not simulated again
    assert len(list((out / "proposals").iterdir())) == whole["rollouts"]
    assert "3 proposal(s) and 0 answer(s) reused" in capsys.readouterr().out


def _scripted_cli(monkeypatch: pytest.MonkeyPatch, vlm: Any) -> None:
    monkeypatch.setattr(cli_plan, "vlm_from_args", lambda args: vlm)


class _Refused(ServiceError):
    pass


def test_a_failed_service_stops_the_run_with_exit_4(tmp_path, scripted, as_plan, monkeypatch, capsys):
    vlm = scripted({"sample/0": as_plan([{"type": "LIFT", "dz": 0.02}]), "sample/1": _Refused("401 refused")})
    _scripted_cli(monkeypatch, vlm)
    out = tmp_path / "run"
    argv = ["plan", "non_toppling_push", "--vlm", "openai", "--k", "2", "--k-max", "4", "--out", str(out)]
    assert main(argv) == 4
    assert "401 refused" in capsys.readouterr().err.splitlines()[-1]
    result = _result(out)
    assert result["status"] == "failed" and "401 refused" in result["error"]
    assert not any(r.startswith("optimize") for r in vlm.roles)  # no query after the refusal
    lines = (out / "prompts" / "exchanges.jsonl").read_text().splitlines()
    assert {json.loads(line)["role"] for line in lines} == {"sample/0", "sample/1"}
    assert (out / "report.md").is_file() and result["success"] is False


def test_vlm_judging_every_plan_a_failure_is_no_success(tmp_path, push_world, scripted, as_plan, monkeypatch):
    _, _, _, ref = push_world  # the reference plan passes the task's own check
    vlm = scripted({"sample/*": as_plan(ref), "evaluate/*": '{"reason": "not there", "success": false}'})
    _scripted_cli(monkeypatch, vlm)
    out = tmp_path / "run"
    argv = ["plan", "non_toppling_push", "--vlm", "openai", "--k", "1", "--k-max", "2", "--no-video"]
    assert main([*argv, "--out", str(out)]) == 0
    result = _result(out)
    assert result["accepted"] is None and result["success"] is False
    assert result["best"]["success"] is True and result["best"]["index"] in (0, 1)
    assert "no plan accepted (best: score" in (out / "report.md").read_text().splitlines()[0]
    # resumed: every answer is replayed from prompts/answers.jsonl, none asked again
    before = len(vlm.calls)
    assert main([*argv, "--out", str(out), "--overwrite"]) == 0
    asked = len(vlm.calls) - before
    assert main([*argv, "--out", str(out), "--resume"]) == 0
    assert len(vlm.calls) == before + asked and _result(out)["resumed"]["exchanges"] == asked


def test_plan_flags_have_help_and_method_is_an_alias(tmp_path):
    from simpact.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["plan", "t", "--method", "template", "--out", str(tmp_path)])
    assert args.planner == "template"
    verbs = next(a for a in parser._actions if a.dest == "verb")
    plan = verbs.choices["plan"]  # type: ignore[attr-defined]
    missing = [a.dest for a in plan._actions if not a.help and a.dest != "help"]
    assert missing == []
    assert "--method" not in plan.format_help() and "--planner" in plan.format_help()
    assert (
        main(["plan", "non_toppling_push", "--frame", str(tmp_path / "none.png"), "--out", str(tmp_path)])
        == 2
    )
