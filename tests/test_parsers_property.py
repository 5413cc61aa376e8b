"""Property-based tests of the parsers (Hypothesis): random plans and task files either parse or raise the
project's own error (PlanError, TaskError: a SimpactError, one line at the command line), never anything
else (a KeyError, a TypeError, a UnicodeDecodeError would end in a traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simpact.core.actions import ACTION_SPECS, Plan, PlanError, load_plan
from simpact.core.errors import SimpactError
from simpact.tasks import load_task, tasks_dir

# derandomize: the same examples in every CI run (a bug found by exploration becomes a plain test)
SETTINGS = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**20), 10**20), st.booleans()
)
scalars = st.one_of(st.none(), numbers, st.text(max_size=8))
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
field_names = st.sampled_from(["dx", "dy", "dz", "d", "dyaw", "reason", "type", "extra"])
actions = st.one_of(
    st.fixed_dictionaries(
        {"type": st.one_of(st.sampled_from(sorted(ACTION_SPECS)), st.text(max_size=6))},
        optional={name: st.one_of(numbers, scalars) for name in ("dx", "dy", "dz", "d", "dyaw", "reason")},
    ),
    st.dictionaries(field_names, values, max_size=4),
    values,
)
start_poses = st.one_of(
    st.fixed_dictionaries(
        {
            "position": st.lists(numbers, min_size=0, max_size=4),
            "quaternion": st.lists(numbers, min_size=0, max_size=5),
        },
        optional={"gripper_width": numbers},
    ),
    values,
)
plans = st.one_of(
    st.fixed_dictionaries(
        {"actions": st.one_of(st.lists(actions, max_size=5), values)},
        optional={"start_pose": start_poses, "description": scalars},
    ),
    values,
)


@SETTINGS
@given(raw=plans)
def test_plan_from_dict_parses_or_raises_plan_error(raw) -> None:
    try:
        Plan.from_dict(raw)
    except PlanError:
        pass


@SETTINGS
@given(raw=plans, cut=st.integers(0, 200), garbage=st.binary(max_size=16))
def test_load_plan_parses_or_raises_plan_error(tmp_path: Path, raw, cut: int, garbage: bytes) -> None:
    text = json.dumps(raw, allow_nan=True)
    for i, data in enumerate((text.encode(), text.encode()[:cut], garbage)):
        path = tmp_path / f"plan{i}.json"
        path.write_bytes(data)
        try:
            load_plan(path)
        except PlanError:
            pass


SHIPPED = yaml.safe_load((tasks_dir() / "non_toppling_push.yaml").read_text())
task_mappings = st.one_of(
    st.dictionaries(
        st.sampled_from(sorted(SHIPPED) + ["bogus"]), values, max_size=len(SHIPPED) + 1
    ),  # random fields
    st.builds(
        lambda key, value: {**SHIPPED, key: value}, st.sampled_from(sorted(SHIPPED)), values
    ),  # one field of a shipped task replaced
    st.builds(lambda key: {k: v for k, v in SHIPPED.items() if k != key}, st.sampled_from(sorted(SHIPPED))),
)


@SETTINGS
@given(raw=task_mappings, seed=st.integers(0, 2**31))
def test_load_task_parses_or_raises_task_error(tmp_path: Path, raw, seed: int) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    try:
        task = load_task(path)
        task.scene(seed)
    except SimpactError:
        pass
