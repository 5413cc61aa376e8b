"""Quaternion (w, x, y, z) and rotation matrix conversions agree with MuJoCo's; rigid-transform helpers."""

import mujoco
import numpy as np
import pytest

from simpact.core.rotations import (
    invert_transform,
    make_transform,
    matrix_to_quat,
    mean_transform,
    nearest_rotation,
    pose_to_transform,
    quat_about_z,
    quat_to_matrix,
    quat_to_rpy,
    rigid_transform_problem,
    rotation_exp,
    rotation_log,
    rpy_to_quat,
    transform_error,
)


def test_matrix_and_quaternion_round_trip_with_mujoco():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(20, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    R = quat_to_matrix(q)
    for qi, Ri in zip(q, R):
        expected = np.zeros(9)
        mujoco.mju_quat2Mat(expected, qi)
        np.testing.assert_allclose(Ri, expected.reshape(3, 3), atol=1e-12)
    back = matrix_to_quat(R)
    assert np.all(back[:, 0] >= 0)
    np.testing.assert_allclose(back, q * np.sign(q[:, :1]), atol=1e-12)  # q and -q are one rotation


def test_an_unnormalised_quaternion_is_normalised_first():
    np.testing.assert_allclose(
        quat_to_matrix(2 * quat_about_z(np.pi / 2)), [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-12
    )


# --- rigid transforms ---------------------------------------------------------------------------------------


def _random_transform(rng: np.random.Generator) -> np.ndarray:
    return make_transform(rotation_exp(rng.normal(size=3)), rng.normal(size=3))


def test_a_transform_and_its_inverse_compose_to_the_identity():
    rng = np.random.default_rng(1)
    T = _random_transform(rng)
    assert rigid_transform_problem(T) is None
    np.testing.assert_allclose(invert_transform(T) @ T, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(invert_transform(T), np.linalg.inv(T), atol=1e-12)


def test_rotation_log_and_exp_are_inverse_and_match_the_quaternion():
    r = np.array([0.3, -0.2, 0.5])
    R = rotation_exp(r)
    np.testing.assert_allclose(rotation_log(R), r, atol=1e-12)
    np.testing.assert_allclose(R, quat_to_matrix(matrix_to_quat(R)), atol=1e-12)
    np.testing.assert_allclose(rotation_exp([0.0, 0.0, np.pi / 2]), quat_to_matrix(quat_about_z(np.pi / 2)))


def test_pose_to_transform_places_the_rotation_and_the_translation():
    T = pose_to_transform([0.4, 0.1, 0.3], quat_about_z(np.pi / 2))
    np.testing.assert_allclose(T @ [1.0, 0.0, 0.0, 1.0], [0.4, 1.1, 0.3, 1.0], atol=1e-12)


def test_nearest_rotation_of_a_perturbed_rotation_is_proper():
    rng = np.random.default_rng(2)
    R = rotation_exp([0.1, 0.2, 0.3])
    P = nearest_rotation(R + 1e-3 * rng.normal(size=(3, 3)))
    np.testing.assert_allclose(P.T @ P, np.eye(3), atol=1e-12)
    assert np.linalg.det(P) > 0
    np.testing.assert_allclose(P, R, atol=5e-3)
    reflection = np.diag([1.0, 1.0, -1.0])
    assert np.linalg.det(nearest_rotation(reflection)) == pytest.approx(1.0)


def test_mean_transform_of_symmetric_offsets_is_the_centre():
    centre = make_transform(rotation_exp([0.0, 0.3, 0.0]), [0.5, 0.0, 0.2])
    offsets = [make_transform(rotation_exp([0.0, 0.0, s * 0.1]), [0.0, s * 0.01, 0.0]) for s in (-1, 1)]
    np.testing.assert_allclose(mean_transform([centre @ o for o in offsets]), centre, atol=1e-12)


def test_transform_error_is_metres_and_radians():
    a = make_transform(np.eye(3), [0.1, 0.0, 0.0])
    b = make_transform(rotation_exp([0.0, 0.0, 0.25]), [0.1, 0.003, 0.004])
    distance, angle = transform_error(a, b)
    assert distance == pytest.approx(0.005, abs=1e-12)
    assert angle == pytest.approx(0.25, abs=1e-12)


def test_rpy_to_quat_inverts_quat_to_rpy():
    rng = np.random.default_rng(0)
    rpy = np.column_stack(
        [rng.uniform(-np.pi, np.pi, 50), rng.uniform(-1.5, 1.5, 50), rng.uniform(-np.pi, np.pi, 50)]
    )
    q = rpy_to_quat(rpy)
    assert np.allclose(np.linalg.norm(q, axis=-1), 1) and (q[:, 0] >= 0).all()
    assert np.allclose(quat_to_rpy(q), rpy, atol=1e-9)
    assert np.allclose(rpy_to_quat([0.0, 0.0, np.pi / 2]), [np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)])
