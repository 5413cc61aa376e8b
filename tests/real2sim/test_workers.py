"""Objects fitted side by side in worker processes (:mod:`real2sim.workers`)."""

from __future__ import annotations

import numpy as np
import pytest

from real2sim import perception
from real2sim.perception import Perception, perceive
from real2sim.types import Real2SimError
from real2sim.workers import WORKERS_ENV, process_pool, worker_count


def _fingerprint(p: Perception) -> list[tuple[object, ...]]:
    """Everything :func:`perceive` decided per object, as exact bytes and reprs."""
    return [
        (
            g.label,
            g.symmetry,
            g.concave,
            repr((g.fit_rmse_m, g.edge_radii_m, g.neck_m, g.prism_depth_m, g.heightfield_cell_m)),
            g.support_m,
            *(
                np.ascontiguousarray(a).tobytes()
                for a in (g.mesh.vertices, g.mesh.faces, g.position, g.quaternion, g.extent, g.points_world)
            ),
        )
        for g in p.objects
    ]


def test_objects_fitted_in_two_processes_are_bit_identical_to_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """PoseCNN 000003 (a potted meat can, a soup can, a bowl), fitted in two worker processes and in this
    one: the same shapes, poses, points, warnings and masks, to the bit, in the labels' order."""
    from real2sim.datasets import SharedDataMissing, read_any_frame, shared_data_dir
    from simpact.bench.real_truth import REAL_FRAMES

    rel = "rgbd/posecnn/000003-color.png"
    try:
        frame = read_any_frame(shared_data_dir(rel))
    except SharedDataMissing as err:
        pytest.skip(f"shared data absent: {err}")
    labels = list(REAL_FRAMES[rel])
    pools: list[object] = []
    monkeypatch.setattr(
        perception, "process_pool", lambda warm: pools.append(process_pool(warm)) or pools[-1]
    )
    runs = {}
    for workers in ("1", "2"):
        monkeypatch.setenv(WORKERS_ENV, workers)
        runs[workers] = perceive(frame, labels)
    assert pools[0] is None and pools[1] is not None  # one process, then two
    one, two = runs["1"], runs["2"]
    assert len(one.objects) >= 3
    assert _fingerprint(two) == _fingerprint(one)
    assert two.warnings == one.warnings
    assert [s.label for s in two.segments] == [s.label for s in one.segments]
    assert all(np.array_equal(a.mask, b.mask) for a, b in zip(one.segments, two.segments))
    assert two.timings_s["objects"] > 0 and "pose" in two.timings_s


@pytest.mark.parametrize("text", ["0", "-1", "two", "1.5"])
def test_a_worker_count_that_is_not_a_whole_number_names_the_setting(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv(WORKERS_ENV, text)
    with pytest.raises(Real2SimError, match=WORKERS_ENV):
        worker_count()


def test_the_worker_count_defaults_to_the_usable_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv(WORKERS_ENV, " 3 ")
    assert worker_count() == 3
    monkeypatch.delenv(WORKERS_ENV)
    assert worker_count() == min(len(os.sched_getaffinity(0)), 8)


def _square_or_fail(x: int) -> int:
    if x < 0:
        raise ValueError(f"job {x} failed")
    return x * x


def test_jobs_shared_with_helpers_come_back_in_order_and_raise_their_errors() -> None:
    """:func:`real2sim.workers.run_all` with a thread pool standing in for the helper processes: every job
    runs once, results in the jobs' order whatever the costs, a job's error raised in the caller."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from real2sim.workers import Helpers, run_all

    ran: list[str] = []

    def job(x: int) -> int:
        ran.append(threading.current_thread().name)
        return _square_or_fail(x)

    with ThreadPoolExecutor(2, thread_name_prefix="helper") as executor:
        helpers = Helpers(executor, 2)
        jobs = [(x,) for x in range(12)]
        assert run_all(job, jobs, helpers, costs=[(7 * x) % 5 for x in range(12)]) == [
            x * x for x in range(12)
        ]
        assert len(ran) == 12 and any(n.startswith("helper") for n in ran)
        with pytest.raises(ValueError, match="job -3 failed"):
            run_all(_square_or_fail, [(1,), (2,), (-3,), (4,)], helpers)
    assert run_all(_square_or_fail, [(2,), (3,)], None) == [4, 9]  # no helpers: here, in order
