"""Physical parameters: the material table offline, the VLM's A.1 answers with sources, and repairs."""

from __future__ import annotations

import numpy as np
import pytest

from real2sim.materials import PhysicsError, lookup_material, table_parameters
from real2sim.physics import estimate_physics
from simpact.vlm import MissingKeyError
from tests.vlm_doubles import ScriptedVLM

EXTENTS = {"tomato_soup_can": (0.066, 0.066, 0.101), "dough": (0.08, 0.06, 0.03), "rope": (0.3, 0.01, 0.01)}


def test_material_table_picks_the_head_noun_and_fills_every_source() -> None:
    assert lookup_material("tomato soup can")[0] == "can"
    assert lookup_material("green bowl")[0] == "bowl"
    assert lookup_material("Cheez-It crackers")[0] == "cracker"
    assert lookup_material("widget")[0] == "default"
    can = table_parameters("tomato soup can", EXTENTS["tomato_soup_can"])
    assert can.kind == "rigid" and 0.3 < can.mass_kg < 0.4  # YCB: 0.349 kg
    assert can.sources == {
        "kind": "material_table",
        "mass_kg": "material_table",
        "friction": "material_table",
    }
    dough = table_parameters("play dough", EXTENTS["dough"])
    assert dough.kind == "mpm" and dough.material == "plasticine" and dough.yield_stress_pa
    assert dough.mass_kg == pytest.approx(1200.0 * 0.08 * 0.06 * 0.03)
    assert set(dough.sources) >= {"young_modulus_pa", "poisson_ratio", "density_kg_m3", "material"}
    assert table_parameters("widget", (0.1, 0.1, 0.1)).sources["mass_kg"] == "default"
    with pytest.raises(PhysicsError, match="extent"):
        table_parameters("can", (0.1, 0.0, 0.1))


def test_offline_estimate_uses_the_table_and_overrides_record_their_source() -> None:
    est = estimate_physics(EXTENTS, overrides={"tomato_soup_can": {"mass_kg": 0.2}})
    can = est.parameters["tomato_soup_can"]
    assert can.mass_kg == 0.2 and can.sources["mass_kg"] == "task"
    assert can.sources["friction"] == "material_table"
    assert est.parameters["rope"].kind == "pd" and est.parameters["dough"].kind == "mpm"
    assert est.exchange == [] and est.notes["rope"]["table_entry"] == "rope"
    with pytest.raises(PhysicsError, match="no physical parameter"):
        estimate_physics(EXTENTS, overrides={"rope": {"colour": 1}})


def test_vlm_answers_replace_table_values_with_source_vlm() -> None:
    answer = {
        "objects": [
            {
                "name": "tomato soup can",
                "deformable": False,
                "simulator": "rigid",
                "reason": "metal can",
                "mass_kg": 0.35,
                "friction": 0.3,
            },
            {
                "name": "dough",
                "deformable": True,
                "simulator": "mpm",
                "reason": "soft",
                "material": "plasticine",
                "youngs_modulus_pa": 1.5e5,
                "poissons_ratio": 0.35,
                "density_kg_m3": 1100.0,
                "yield_stress_pa": 2e3,
            },
            {
                "name": "rope",
                "deformable": True,
                "simulator": "pd",
                "reason": "stiff strand",
                "youngs_modulus_pa": 2e6,
                "poissons_ratio": 0.3,
                "density_kg_m3": 500.0,
            },
        ]
    }
    vlm = ScriptedVLM(answer)
    image = np.zeros((8, 8, 3), np.uint8)
    est = estimate_physics(EXTENTS, vlm=vlm, image=image, instruction="knead the dough")
    assert [r for r, _ in vlm.requests] == ["physics"]
    prompt = vlm.requests[0][1][0]
    assert "knead the dough" in prompt and "tomato_soup_can" in prompt and "Young" in prompt
    assert isinstance(vlm.requests[0][1][1], np.ndarray)
    can, dough, rope = (est.parameters[n] for n in ("tomato_soup_can", "dough", "rope"))
    assert (can.mass_kg, can.friction) == (0.35, 0.3) and can.sources["mass_kg"] == "vlm"
    assert can.young_modulus_pa is None
    assert dough.young_modulus_pa == 1.5e5 and dough.sources["yield_stress_pa"] == "vlm"
    assert dough.mass_kg == pytest.approx(1100.0 * 0.08 * 0.06 * 0.03) and dough.sources["mass_kg"] == "vlm"
    assert dough.sources["friction"] == "material_table"  # the VLM gave none: the table's stays
    assert rope.kind == "pd" and rope.density_kg_m3 == 500.0 and rope.friction_angle_deg is None
    assert est.notes["dough"]["vlm_reason"] == "soft" and not est.warnings


def test_vlm_kind_change_and_out_of_range_values_fall_back_with_warnings() -> None:
    answer = {
        "objects": [
            {
                "name": "tomato_soup_can",
                "deformable": True,
                "simulator": "mpm",
                "reason": "?",
                "material": "metal",
                "poissons_ratio": 0.9,
            },
            {"name": "dough", "deformable": False, "simulator": "rigid", "reason": "?", "mass_kg": -1},
            {"name": "rope", "simulator": "cloth", "reason": "?"},
        ]
    }
    est = estimate_physics(EXTENTS, vlm=ScriptedVLM(answer))
    can, dough, rope = (est.parameters[n] for n in ("tomato_soup_can", "dough", "rope"))
    assert can.kind == "mpm" and can.material == "metal" and can.poisson_ratio == 0.3
    assert can.sources["poisson_ratio"] == "material_table" and can.sources["kind"] == "vlm"
    assert (
        dough.kind == "rigid"
        and dough.young_modulus_pa is None
        and dough.sources["mass_kg"] == "material_table"
    )
    assert rope.kind == "pd" and rope.sources["kind"] == "material_table"
    text = " ".join(est.warnings)
    assert "poissons_ratio" in text and "mass_kg" in text and "simulator 'cloth'" in text


def test_malformed_answer_gets_one_repair_round_then_the_table() -> None:
    good = {
        "objects": [
            {"name": n, "deformable": False, "simulator": "rigid", "reason": "r", "mass_kg": 1.0}
            for n in EXTENTS
        ]
    }
    vlm = ScriptedVLM("I think they are heavy.", good)
    est = estimate_physics(EXTENTS, vlm=vlm)
    assert [r for r, _ in vlm.requests] == ["physics", "physics/repair"]
    assert all(p.mass_kg == 1.0 and p.kind == "rigid" for p in est.parameters.values())
    vlm = ScriptedVLM("no", "still no")
    est = estimate_physics(EXTENTS, vlm=vlm)
    assert est.parameters["rope"].kind == "pd" and est.parameters["rope"].sources["kind"] == "material_table"
    assert any("gave nothing" in w for w in est.warnings) and len(est.exchange) == 2


def test_a_configured_vlm_without_a_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from simpact.vlm import get_vlm

    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    try:
        with pytest.raises(MissingKeyError, match="GEMINI_API_KEY"):
            get_vlm("gemini")
    except ImportError:  # pragma: no cover - the vlm extra is absent
        pytest.skip("google-genai not installed")


def test_forced_kind_and_empty_input() -> None:
    est = estimate_physics({"cube": (0.05, 0.05, 0.05)}, kinds={"cube": "mpm"})
    cube = est.parameters["cube"]
    assert cube.kind == "mpm" and cube.sources["kind"] == "user" and cube.material == "plasticine"
    with pytest.raises(PhysicsError):
        estimate_physics({})
    with pytest.raises(PhysicsError, match="kind"):
        estimate_physics({"cube": (0.05, 0.05, 0.05)}, kinds={"cube": "soft"})


def test_a_task_can_make_a_deformable_looking_object_rigid() -> None:
    est = estimate_physics(
        {"bean_07": (0.015, 0.015, 0.015)}, kinds={"bean_07": "rigid"}, kind_sources={"bean_07": "task"}
    )
    bean = est.parameters["bean_07"]
    assert bean.kind == "rigid" and bean.sources["kind"] == "task" and bean.mass_kg > 0
    assert bean.young_modulus_pa is None and bean.density_kg_m3 is None and "material" not in bean.sources
    assert estimate_physics({"bean_07": (0.015, 0.015, 0.015)}).parameters["bean_07"].kind == "mpm"
