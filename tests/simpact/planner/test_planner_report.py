"""The record of a run: result.json contract, proposals, prompts, images, report.md, no keys; replay; CLI."""

from __future__ import annotations

import argparse
import json

import pytest

from simpact.cli.plan import add_parsers, cmd_plan
from simpact.planner.loop import LoopConfig, plan_with_vlm
from simpact.planner.report import write_report
from simpact.planner.session import PlanningError
from simpact.vlm.replay import RecordingVLM
from simpact.vlm.settings import VLMSettingError

SECRET = "sk-test-9f8e7d6c5b4a3210"
LIFT = [{"type": "LIFT", "dz": 0.02}]
CONTRACT = {"success", "plan", "iterations", "rollouts", "wall_s", "vlm", "audit", "vlm_success", "proposals"}


@pytest.fixture(scope="module")
def run(push_world, scripted, as_plan, tmp_path_factory):
    """One recorded session with images (default config), shared by the tests below."""
    task, scene, world, ref = push_world
    vlm = scripted(
        {
            "sample/0": f"leaked {SECRET} in prose",  # a key echoed by a model must not reach the files
            "sample/0/repair": as_plan(LIFT),
            "sample/1": as_plan(LIFT),
            "optimize/*": as_plan(ref),
            "evaluate/*": '{"reason": "at the line", "success": true}',
        }
    )
    recording = tmp_path_factory.mktemp("session") / "answers.jsonl"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", SECRET)
        result = plan_with_vlm(
            task, scene, world, RecordingVLM(vlm, recording), config=LoopConfig(k=2, k_max=3)
        )
        yield task, world, result, recording


def test_report_files_and_contract(run, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    task, world, result, _ = run
    out = tmp_path / "out"
    path = write_report(result, out, world, instruction=task.instruction, video=False)
    payload = json.loads(path.read_text())
    assert CONTRACT <= payload.keys()
    assert payload["success"] is True and payload["vlm_success"] is True
    assert payload["audit"]["audited"] == len(payload["proposals"]) and payload["audit"]["flagged"] == 0
    assert payload["rollouts"] == 3 and payload["iterations"] == 2 and payload["vlm"] == "scripted"
    assert [p["source"] for p in payload["proposals"]] == ["sample/0", "sample/1", "optimize/1"]
    assert all({"plan", "score", "success", "source"} <= p.keys() for p in payload["proposals"])
    for i in range(3):
        plan = json.loads((out / f"proposals/{i:03d}/plan.json").read_text())
        assert plan["start_pose"] and plan["actions"]
        rollout = json.loads((out / f"proposals/{i:03d}/rollout.json").read_text())
        assert len(rollout["states"]) == len(plan["actions"]) and "evaluation" in rollout
    prompts = sorted(p.name for p in (out / "prompts").iterdir())
    assert "exchanges.jsonl" in prompts and any("sample_0_repair" in p for p in prompts)
    assert (out / "initial.png").read_bytes()[:4] == b"\x89PNG" and (out / "final.png").is_file()
    report = (out / "report.md").read_text()
    assert "![initial](initial.png)" in report and "![final](final.png)" in report and "accepted" in report
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="verb"))
    return parser.parse_args(["plan", *argv])


def test_cli_replay_writes_a_record(run, tmp_path, capsys):
    _, _, result, recording = run
    out = tmp_path / "cli"
    argv = ["--vlm", "replay", "--replay", str(recording), "--k", "2", "--k-max", "3", "--no-video"]
    args = _args("non_toppling_push", *argv, "--out", str(out))
    cmd_plan(args)
    payload = json.loads((out / "result.json").read_text())
    assert payload["success"] is True and payload["rollouts"] == 3 and payload["vlm"] == "replay"
    # the replayed session is the recorded one, plan for plan
    assert [p["plan"] for p in payload["proposals"]] == [p.plan.to_dict() for p in result.proposals]
    assert "success" in capsys.readouterr().out.splitlines()[-1]


def test_cli_bad_input(tmp_path):
    with pytest.raises(VLMSettingError, match="--replay"):
        cmd_plan(_args("non_toppling_push", "--vlm", "replay", "--out", str(tmp_path)))
    with pytest.raises(PlanningError, match="k_max"):
        cmd_plan(
            _args("non_toppling_push", "--vlm", "replay", "--k", "5", "--k-max", "3", "--out", str(tmp_path))
        )
