"""The fast step's forward kinematics by tree level against the script's bone-by-bone order."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the decompressor's kinematics are torch code")

from motion_matching.decompressor import kinematics as kin  # noqa: E402
from motion_matching.decompressor.level_kinematics import level_forward_kinematics  # noqa: E402
from motion_matching.toolkit.skeleton import BONE_PARENTS  # noqa: E402

# a skeleton whose bones are not numbered depth by depth, with a parent of several children
SHUFFLED_PARENTS = (-1, 0, 0, 1, 3, 2, 1, 4, 5, 5)


def world_and_gradients(kinematics, parents, seed):
    generator = torch.Generator().manual_seed(seed)
    txy = torch.randn(16, 2, len(parents), 3, 2, generator=generator, requires_grad=True)
    local = [torch.randn(16, 2, len(parents), 3, generator=generator, requires_grad=True) for _ in range(3)]
    world = kinematics(kin.matrix_from_two_columns(txy), *local, np.array(parents))
    weights = [torch.rand(part.shape, generator=generator) for part in world]
    loss = sum((part * weight).sum() for part, weight in zip(world, weights))
    return world, torch.autograd.grad(loss, [txy, *local])


@pytest.mark.parametrize("parents", [BONE_PARENTS, SHUFFLED_PARENTS], ids=["toolkit skeleton", "shuffled"])
def test_levels_give_the_bone_by_bone_world_values_and_gradients_to_float_rounding(parents):
    by_bone, by_bone_gradients = world_and_gradients(kin.matrix_forward_kinematics, parents, seed=3)
    by_level, by_level_gradients = world_and_gradients(level_forward_kinematics, parents, seed=3)
    for expected, actual in zip(by_bone, by_level):
        assert expected.shape == actual.shape
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    for expected, actual in zip(by_bone_gradients, by_level_gradients):
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4 * float(expected.abs().max()))
