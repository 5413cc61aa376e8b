"""Prompt templates load from the installed package and fill; missing values are clear errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simpact.core.actions import ACTION_SPECS
from simpact.vlm import UnknownVLMError, available_vlms, get_vlm
from simpact.vlm.answers import plan_schema
from simpact.vlm.prompts import ROLES, PromptError, PromptTemplate, load_prompt, render_prompt

VALUES: dict[str, dict[str, Any]] = {
    "sample": {"task": "Push the carton.", "context": "ee: [0.36, 0, 0.25]"},
    "optimize": {"task": "Push the carton.", "context": "ee: ...", "history": "plan 0: score 0.2"},
    "evaluate": {"task": "Push the carton.", "context": "ee: ...", "rollout": {"carton": [0.7, 0.0, 0.1]}},
    "object_labels": {"task": "Put the green bowl into the white bowl."},
    "physics": {"task": "Shape the dough.", "objects": ["dough", "table"]},
    "assign_labels": {"labels": ["green bowl"], "clusters": [{"index": 0, "height_m": 0.05}]},
    "repair": {"errors": "- action 0: unknown type 'JUMP'"},
}


@pytest.mark.parametrize("role", ROLES)
def test_every_template_loads_and_fills(role):
    template = load_prompt(role)
    assert template.placeholders - {"actions", "plan_schema"} == set(VALUES[role])
    text = render_prompt(role, **VALUES[role])
    assert "$" not in text
    for value in VALUES[role].values():
        if isinstance(value, str):
            assert value in text


@pytest.mark.parametrize("role", ["sample", "optimize"])
def test_planning_prompts_carry_the_vocabulary_and_schema(role):
    text = render_prompt(role, **VALUES[role])
    for name in ACTION_SPECS:
        assert f"- {name}" in text
    assert json.dumps(plan_schema()) in text
    assert "metres" in text and "radians" in text


def test_physics_prompt_asks_the_paper_questions():
    text = render_prompt("physics", **VALUES["physics"])
    for phrase in (
        "rigid",
        "Projective Dynamics",
        "Material Point Method",
        "Young's modulus",
        "Poisson's ratio",
        "density",
        "friction angle",
        "yield stress",
        "{jelly, metal, sand, foam, plasticine}",
    ):
        assert phrase in text
    assert '[\n  "dough",\n  "table"\n]' in text  # lists become JSON


def test_missing_and_unknown_values_are_named():
    with pytest.raises(PromptError, match=r"sample\.md: no value for \$context, \$task"):
        render_prompt("sample")
    with pytest.raises(PromptError, match="no placeholder for taks"):
        render_prompt("object_labels", task="x", taks="y")
    with pytest.raises(PromptError, match="unknown prompt role 'plan'"):
        load_prompt("plan")


def test_a_lone_dollar_is_reported():
    with pytest.raises(PromptError, match="line 2"):
        PromptTemplate("x", "fine\ncosts $5").fill()
    assert PromptTemplate("x", "costs $$5 for $what").fill(what="it") == "costs $5 for it"


def test_registry():
    assert available_vlms() == ["gemini", "openai", "replay"]
    with pytest.raises(UnknownVLMError, match="choose one of gemini, openai, replay"):
        get_vlm("claude")
    with pytest.raises(UnknownVLMError, match="its settings are path, match_images"):
        get_vlm("replay", path="x", model="y")
