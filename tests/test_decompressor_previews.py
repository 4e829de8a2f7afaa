"""train-decompressor --plots writes the toolkit's BVH previews at each save: decompressor_Ygnd.bvh (the database's
clip 2) and decompressor_Ytil.bvh (the saved decompressor.bin decoding the saved latent.bin), read back by the
project's BVH reader; files of those names that training did not write are refused without --force."""
import json

import numpy as np
import pytest
from click.testing import CliRunner
from decompressor_helpers import FRAMES

from motion_matching.cli import main
from motion_matching.data import generate
from motion_matching.data.bvh.text import read_bvh
from motion_matching.toolkit import formats, quat

torch = pytest.importorskip("torch", reason="the previews come from training a network, which needs torch")
pytest.importorskip("matplotlib", reason="--plots writes PNG previews too, which needs matplotlib")

NAMES = ("decompressor_Ygnd.bvh", "decompressor_Ytil.bvh")
RECORD = "decompressor_previews.json"
DT = 1.0 / 60.0


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A 5-iteration run saving at iterations 0 and 4, with the record read back after the first save."""
    from motion_matching.decompressor.config import DecompressorConfig
    from motion_matching.decompressor.train import train_decompressor
    folder = tmp_path_factory.mktemp("previews")
    files = generate.generate_files(folder, nframes=FRAMES)
    first_save = {}

    def after_step(step, module):
        if step == 1:
            first_save.update(json.loads((folder / "run" / RECORD).read_text()),
                              exist=[(folder / "run" / name).is_file() for name in NAMES])
    config = DecompressorConfig(iterations=5, save_every=4, hidden=64, threads=1)
    train_decompressor(config, database_path=files["database"], features_path=files["features"],
                       out_dir=folder / "run", plots=True, on_step=after_step)
    database = formats.load_database(files["database"])
    start = int(database.range_starts[2])
    frames = slice(start, min(start + 1000, int(database.range_stops[2])))
    return folder, files, database, frames, first_save


def rotations_of(bvh):
    """Each joint's rotation (F, J, 4) from its Zrotation Yrotation Xrotation channels (the last three)."""
    columns = [bvh.motion[:, bvh.channel_columns(joint)][:, -3:] for joint in range(len(bvh.names))]
    return quat.from_euler(np.radians(np.stack(columns, axis=1)), order="zyx")


def angle_between(a, b):
    """Radians (...) of the rotation between quaternions ``a`` and ``b`` (..., 4)."""
    a, b = quat.normalize(np.asarray(a, np.float64)), quat.normalize(np.asarray(b, np.float64))
    return 2.0 * np.arccos(np.clip(np.abs(np.sum(a * b, axis=-1)), 0.0, 1.0))


def check_layout(bvh, database, frames):
    nbones = len(database.bone_parents)
    assert bvh.names == [f"joint_{bone}" for bone in range(nbones)]
    assert bvh.parents.tolist() == database.bone_parents.tolist()
    assert bvh.nframes == frames.stop - frames.start
    assert bvh.frame_time == pytest.approx(DT, abs=1e-6)
    assert bvh.channels[0] == ("Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation")
    assert set(bvh.channels[1:]) == {("Zrotation", "Yrotation", "Xrotation")}


def test_each_save_writes_both_and_ygnd_is_the_database_clip(trained):
    folder, _, database, frames, first_save = trained
    assert first_save["exist"] == [True, True] and first_save["iteration"] == 0
    record = json.loads((folder / "run" / RECORD).read_text())
    assert record["iteration"] == 4 and record["frames"] == [frames.start, frames.stop]
    bvh = read_bvh(folder / "run" / NAMES[0])
    check_layout(bvh, database, frames)
    positions = database.bone_positions.astype(np.float64)
    np.testing.assert_allclose(bvh.offsets, 100.0 * positions[frames.start], atol=1e-5)
    np.testing.assert_allclose(bvh.motion[:, :3], 100.0 * positions[frames, 0], atol=1e-5)
    assert angle_between(rotations_of(bvh), database.bone_rotations[frames]).max() < 1e-6


def test_ytil_is_the_saved_decompressor_decoding_the_saved_latent(trained):
    from motion_matching.decompressor import kinematics as kin
    from motion_matching.decompressor.evaluate import load_decompressor
    from motion_matching.decompressor.objective import split_output
    folder, files, database, frames, _ = trained
    latent = formats.load_latent(folder / "run" / "latent.bin")
    features = formats.load_features(files["features"]).features.astype(np.float32)
    nbones = len(database.bone_parents)
    module = load_decompressor(folder / "run" / "decompressor.bin", nfeatures=features.shape[1],
                               nlatent=latent.shape[1], nbones=nbones)
    with torch.no_grad():
        til = split_output(module.decode(torch.from_numpy(features[frames])[None],
                                         torch.from_numpy(latent[frames])[None]), nbones)
        matrices = kin.matrix_from_two_columns(til["txy"])[0].double().numpy()
    matrices[..., 0] /= np.linalg.norm(matrices[..., 0], axis=-1, keepdims=True)  # the rotation of the two columns
    bvh = read_bvh(folder / "run" / NAMES[1])
    check_layout(bvh, database, frames)
    np.testing.assert_allclose(quat.to_xform(rotations_of(bvh)[:, 1:]), matrices, atol=1e-5)
    np.testing.assert_allclose(bvh.offsets[1:], 100.0 * til["pos"][0, 0].numpy(), atol=1e-4)
    # the root from the database's at the first frame, turned by the decoded angular velocity (world form)
    rotation = quat.normalize(database.bone_rotations[frames.start, 0].astype(np.float64))
    position = database.bone_positions[frames.start, 0].astype(np.float64)
    rvel, rang = til["rvel"][0].double().numpy(), til["rang"][0].double().numpy()
    root_rotations, root_positions = [rotation], [position]
    for frame in range(1, bvh.nframes):
        position = position + quat.mul_vec(rotation, rvel[frame - 1]) * DT
        rotation = quat.mul(quat.from_scaled_angle_axis(quat.mul_vec(rotation, rang[frame - 1]) * DT), rotation)
        root_rotations.append(rotation)
        root_positions.append(position)
    np.testing.assert_allclose(bvh.offsets[0], 100.0 * root_positions[0], atol=1e-5)
    np.testing.assert_allclose(bvh.motion[:, :3], 100.0 * np.stack(root_positions), atol=1e-4)
    assert angle_between(rotations_of(bvh)[:, 0], np.stack(root_rotations)).max() < 1e-5


def train(*arguments):
    return CliRunner().invoke(main, ["train-decompressor", "--hidden", "64", "--threads", "1", "--quiet",
                                     "--out", "run", "--plots", "--save-every", "1", *arguments])


def test_a_file_of_those_names_training_did_not_write_is_refused(tmp_path, monkeypatch):
    generate.generate_files(tmp_path, nframes=FRAMES)
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / NAMES[1]).write_text("mine")
    refused = train("--iterations", "2")
    assert refused.exit_code == 1
    assert refused.output == ("Error: run/decompressor_Ytil.bvh: exists (not written by train-decompressor); "
                              "pass --force to replace it, or choose another --out\n")
    assert (run / NAMES[1]).read_text() == "mine" and not (run / "decompressor.bin").exists()
    assert train("--iterations", "2", "--force").exit_code == 0
    assert train("--iterations", "3").exit_code == 0  # its own previews are replaced without --force
    assert json.loads((run / RECORD).read_text())["iteration"] == 2
    edited = (run / NAMES[0]).read_text() + "\n"
    (run / NAMES[0]).write_text(edited)  # a changed file is no longer the one the record names
    refused = train("--iterations", "4")
    assert refused.exit_code == 1
    assert refused.output == ("Error: run/decompressor_Ygnd.bvh: exists (not written by train-decompressor); "
                              "pass --force to replace it, or choose another --out\n")
    assert (run / NAMES[0]).read_text() == edited
    (run / RECORD).write_text("{}")
    refused = train("--iterations", "4")
    assert refused.exit_code == 1
    assert refused.output == ("Error: run/decompressor_Ygnd.bvh: exists, as do decompressor_Ytil.bvh and "
                              "decompressor_previews.json (not written by train-decompressor); pass --force to "
                              "replace them, or choose another --out\n")
    assert (run / RECORD).read_text() == "{}"


def test_a_skeleton_out_of_depth_first_order_is_written_in_it(tmp_path):
    from motion_matching.data.bvh.text import write_bvh
    from motion_matching.decompressor.previews import clip_bvh
    parents, order = np.array([-1, 0, 0, 1]), [0, 1, 3, 2]  # bone 3 is bone 1's child: BVH lists it before 2
    rotations = quat.from_euler(np.radians(np.arange(24.0).reshape(2, 4, 3)), order="zyx")
    positions = np.arange(24.0).reshape(2, 4, 3) / 10.0
    write_bvh(tmp_path / "clip.bvh", clip_bvh(rotations, positions, parents))
    bvh = read_bvh(tmp_path / "clip.bvh")
    assert bvh.names == ["joint_0", "joint_1", "joint_3", "joint_2"] and bvh.parents.tolist() == [-1, 0, 1, 0]
    np.testing.assert_allclose(bvh.offsets, 100.0 * positions[0, order], atol=1e-5)
    np.testing.assert_allclose(bvh.motion[:, :3], 100.0 * positions[:, 0], atol=1e-5)
    assert angle_between(rotations_of(bvh), rotations[:, order]).max() < 1e-6
