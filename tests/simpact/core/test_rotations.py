"""Quaternion (w, x, y, z) and rotation matrix conversions agree with MuJoCo's."""

import mujoco
import numpy as np

from simpact.core.rotations import matrix_to_quat, quat_about_z, quat_to_matrix


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
