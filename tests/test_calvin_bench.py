"""The CALVIN runner: the protocol's budget and first-failure rule, the metrics, and a killed run that
resumes without losing or repeating a chain."""

from __future__ import annotations

import json

import imageio.v3 as iio
import numpy as np
import pytest

pytest.importorskip("pybullet")

from simpact.bench.calvin import format_table, run_calvin  # noqa: E402
from simpact.calvin.data import load_chains  # noqa: E402
from simpact.calvin.env import CalvinEnv  # noqa: E402
from simpact.calvin.evaluate import evaluate_chain, scripted_policy, summarise  # noqa: E402
from simpact.core.errors import SimpactError  # noqa: E402
from tests.calvin_data import needs_calvin_data  # noqa: E402

pytestmark = needs_calvin_data


def _hold(env, task, instruction):
    """Stay where the chain left the hand, forever (the budget must stop it)."""
    pose = env.robot_obs()
    while True:
        env.step(np.r_[pose[:6], 1.0])


def test_a_subtask_gets_360_steps_and_a_failure_ends_the_chain():
    with CalvinEnv() as env:
        record = evaluate_chain(env, load_chains(0, 1)[0], _hold)
    assert record["completed"] == 0 and len(record["subtasks"]) == 1
    assert record["subtasks"][0]["steps"] == 360 and record["backend"] == "rebuild"


def test_the_scripted_policy_completes_a_chain_and_policy_errors_are_recorded():
    chain = load_chains(2, 1)[0]  # lift_pink_block_slider, place_in_slider, open_drawer, rotate, lift
    with CalvinEnv() as env:
        done = evaluate_chain(env, chain, scripted_policy)

        def broken(env, task, instruction):
            raise ValueError("no idea")

        failed = evaluate_chain(env, chain, broken)
    assert done["completed"] == 5, done
    assert all(s["steps"] <= 360 for s in done["subtasks"])
    assert failed["completed"] == 0 and failed["subtasks"][0]["policy_error"] == "ValueError: no idea"


def test_metrics_count_consecutive_successes():
    records = [{"completed": n} for n in (0, 1, 5, 3)]
    summary = summarise(records)
    assert summary["sr"] == [0.75, 0.5, 0.5, 0.25, 0.25] and summary["avg_len"] == 2.25
    assert "| 75.0 | 50.0 | 50.0 | 25.0 | 25.0 | 2.25 |" in format_table(
        {**summary, "mode": "scripted", "backend": "rebuild"}
    )


def test_a_killed_run_resumes_without_losing_or_repeating_a_chain(tmp_path):
    seen: list[int] = []

    def dies_on_second_chain(env, task, instruction):
        seen.append(task)
        if len(seen) == 2:
            raise KeyboardInterrupt
        env.step(np.r_[env.robot_obs()[:6], 1.0])

    summaries: list[dict] = []
    with pytest.raises(KeyboardInterrupt):
        run_calvin(tmp_path, 10, 3, policy=dies_on_second_chain, on_summary=summaries.append)
    lines = (tmp_path / "runs.jsonl").read_text().splitlines()
    assert [json.loads(line)["chain"] for line in lines] == [10]
    # the finished chain's summary was reported before the interrupt (the command line keeps it as so_far)
    assert len(summaries) == 1 and summaries[0]["chains"] == 1
    assert set(summaries[0]["wall_s_per_chain"]) == {"10"}

    ran: list[str] = []

    def quick(env, task, instruction):
        ran.append(task)
        env.step(np.r_[env.robot_obs()[:6], 1.0])

    result = run_calvin(tmp_path, 10, 3, policy=quick)
    chains = [json.loads(line)["chain"] for line in (tmp_path / "runs.jsonl").read_text().splitlines()]
    assert chains == [10, 11, 12] and len(ran) == 2  # one failed subtask each for chains 11 and 12
    assert result["chains"] == 3 and result["backend"] == "rebuild" and result["mode"] == "scripted"
    assert set(result["wall_s_per_chain"]) == {"10", "11", "12"}
    # every chain is audited: its artifact count is logged and the summary gives the success range
    assert result["artifacts_per_chain"] == {"10": 0, "11": 0, "12": 0}
    assert result["audit"]["flagged_chains"] == 0 and result["audit"]["lower"] == result["audit"]["upper"]
    with pytest.raises(SimpactError, match="mode"):
        run_calvin(tmp_path, 0, 1, mode="oracle")


def test_video_films_the_static_camera_of_each_chain(tmp_path):
    def four_steps(env, task, instruction):
        for _ in range(4):
            env.step(np.r_[env.robot_obs()[:6], 1.0])

    result = run_calvin(tmp_path, 5, 1, policy=four_steps, video=True)
    record = json.loads((tmp_path / "runs.jsonl").read_text())
    frames = iio.imread(record["video"])
    assert result["chains"] == 1 and frames.shape[0] == 2 and frames.shape[1:3] == (200, 200)


def test_an_unknown_executor_or_a_policy_object_on_ray_is_refused_before_any_chain(tmp_path):
    with pytest.raises(SimpactError, match="executor"):
        run_calvin(tmp_path, 0, 1, executor="dask")
    with pytest.raises(SimpactError, match="mode names the policy"):
        run_calvin(tmp_path, 0, 1, policy=scripted_policy, executor="ray")
    assert not (tmp_path / "runs.jsonl").exists()
