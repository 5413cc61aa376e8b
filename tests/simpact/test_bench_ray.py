"""``--executor ray`` on a real local Ray instance (2 CPUs, shared by the file): ``bench tasks`` and
``bench calvin`` give the records the local executor gives, in the same resumable log."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

import pytest

from simpact.bench.calvin import _chain_task, _ChainJob, run_calvin
from simpact.bench.episodes import RUNS
from simpact.bench.ray_executor import ray_map
from simpact.bench.tasks import run_tasks
from simpact.calvin.data import load_chains
from tests.calvin_data import needs_calvin_data

TASK = "non_toppling_push"
VOLATILE = ("wall_s", "plan_wall_s", "rollout_wall_s", "detect_s")
"""Wall times differ from run to run; everything else in a record must not."""


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    """One Ray instance for the whole file (starting one costs seconds); the executors find it running. Ray is
    a dev dependency: a missing one fails here, it is not skipped."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    yield
    ray.shutdown()


def _lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / RUNS).read_text().splitlines() if line.strip()]


def _timeless(value):
    """``value`` without wall times, at any depth."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def _stable(records: list[dict], key: str) -> list[dict]:
    """Records without their wall times, in ``key`` order (Ray logs them as they finish)."""
    return sorted((_timeless(r) for r in records), key=lambda r: r[key])


def test_bench_tasks_on_ray_gives_the_local_records(tmp_path):
    local = run_tasks([TASK], [1, 2], tmp_path / "local", workers=1)
    on_ray = run_tasks([TASK], [1, 2], tmp_path / "ray", executor="ray", workers=2)
    assert on_ray["executor"] == "ray" and on_ray["errors"] == [] == local["errors"]
    assert on_ray["tasks"][TASK]["successes"] == local["tasks"][TASK]["successes"] == 2
    assert on_ray["tasks"][TASK]["mean_score"] == local["tasks"][TASK]["mean_score"]
    assert _stable(_lines(tmp_path / "ray"), "seed") == _stable(_lines(tmp_path / "local"), "seed")


@needs_calvin_data
def test_bench_calvin_on_ray_logs_the_local_chains_and_resumes(tmp_path):
    local = run_calvin(tmp_path / "local", 2, 2)
    on_ray = run_calvin(tmp_path / "ray", 2, 2, executor="ray", workers=2)
    assert _stable(_lines(tmp_path / "ray"), "chain") == _stable(_lines(tmp_path / "local"), "chain")
    assert on_ray["executor"] == "ray" and on_ray["sr"] == local["sr"] and on_ray["chains"] == 2

    # a killed run left chain 2 in the log: the rerun runs chain 3 only, and reports both
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    (resumed / RUNS).write_text(json.dumps(_lines(tmp_path / "local")[0]) + "\n")
    result = run_calvin(resumed, 2, 2, executor="ray", workers=2)
    lines = _lines(resumed)
    assert Counter(r["chain"] for r in lines) == {2: 1, 3: 1}
    assert lines[0] == _lines(tmp_path / "local")[0]  # the logged chain was not rerun
    assert result["chains"] == 2 and set(result["wall_s_per_chain"]) == {"2", "3"}


@needs_calvin_data
def test_a_chain_that_fails_on_its_worker_comes_back_as_one_error_line():
    job = _ChainJob(load_chains(4, 1)[0], "scripted", "no_such_backend")
    (record,) = ray_map(_chain_task, [job], workers=2)
    assert record["seed"] == 4 and "no_such_backend" in record["error"] and "\n" not in record["error"]
