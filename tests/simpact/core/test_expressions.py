import pytest

from simpact.core.expressions import ExpressionError, evaluate

NAMES = {"carton.x": 0.5, "ee.x": 0.4, "targets.line_x": 0.7}


def test_arithmetic_over_names():
    assert evaluate("carton.x - ee.x - 0.06", NAMES) == pytest.approx(0.04)
    assert evaluate("-(targets.line_x - carton.x) / 2", NAMES) == pytest.approx(-0.1)
    assert evaluate("max(abs(-1), sqrt(4))", NAMES) == 2.0
    assert evaluate(0.25, NAMES) == 0.25


@pytest.mark.parametrize(
    "text, message",
    [
        ("carton.z", "unknown name 'carton.z'"),
        ("__import__('os')", "not allowed"),
        ("carton.x ** 2", "not allowed"),
        ("1 +", "cannot parse"),
    ],
)
def test_rejects_unknown_names_and_code(text, message):
    with pytest.raises(ExpressionError, match=message.replace("(", "\\(").replace("*", "\\*")):
        evaluate(text, NAMES)
