"""bvh_import / bvh_export: LaFAN1-style clips through the toolkit's pipeline, and databases back to BVH."""
import numpy as np
import pytest
from click.testing import CliRunner
from scipy.interpolate import griddata
from scipy.signal import savgol_filter

from motion_matching.data import database_build, features
from motion_matching.data.bvh import exporter as bvh_export
from motion_matching.data.bvh import importer as bvh_import
from motion_matching.data.bvh import text as bvh
from motion_matching.errors import BvhError, InvalidFile
from motion_matching.toolkit import formats, quat, skeleton

from conftest import shared_fixture

NBONES = len(skeleton.BONE_NAMES)
FEET = [skeleton.LEFT_FOOT - 1, skeleton.RIGHT_FOOT - 1, skeleton.LEFT_TOE - 1, skeleton.RIGHT_TOE - 1]
HIPS = skeleton.HIPS - 1  # column of the Hips in round-trip distances, which leave out the simulation bone


def smooth_clip(nframes=240, *, seed=0):
    """build_database inputs of smooth procedural motion: (positions (F,23,3) m, rotations (F,23,4)).

    The simulation bone weaves forward while turning; the Hips face their +Y axis forward like
    LaFAN1's; every joint swings by sinusoids of 1-4 rad/s.
    """
    rng = np.random.default_rng(seed)
    time = np.arange(nframes)[:, None] / 60.0
    positions = np.tile(rng.uniform(-0.15, 0.15, (1, NBONES, 3)), (nframes, 1, 1))
    positions[:, 0] = np.concatenate([0.8 * np.sin(0.5 * time), 0 * time, 1.3 * time], axis=1)
    positions[:, 1] = np.concatenate([0.05 * np.sin(2 * time), 0.9 + 0.02 * np.sin(6 * time), 0 * time], axis=1)
    angles = 0.4 * np.sin(time[:, :, None] * rng.uniform(1, 4, (1, NBONES, 3)) + rng.uniform(0, 6, (1, NBONES, 3)))
    rotations = quat.from_euler(angles)
    rotations[:, 0] = quat.from_angle_axis(0.3 * np.sin(0.7 * time[:, 0]), np.array([0.0, 1.0, 0.0]))
    hips_forward = quat.from_angle_axis(np.array(np.pi / 2), np.array([1.0, 0.0, 0.0]))
    rotations[:, 1] = quat.mul(hips_forward, rotations[:, 1])
    return positions, rotations


def smooth_database():
    return database_build.build_database([smooth_clip(240, seed=1), smooth_clip(150, seed=2)])


def round_trip_errors(database, folder):
    """Export and re-import ``database``; returns (world distances (frames, 22) metres, re-imported database).

    Distances cover every range and every bone but the simulation bone.
    """
    paths = bvh_export.write_database_bvh(database, folder)
    again = bvh_import.database_from_bvh_files(paths)
    assert len(again.range_starts) == 2 * len(database.range_starts)
    distances = []
    for index in range(len(database.range_starts)):
        before = database_build.range_world_positions(database, index)
        after = database_build.range_world_positions(again, index)
        assert 0 <= len(before) - len(after) <= 1
        distances.append(np.linalg.norm(before[:len(after)] - after, axis=-1))
    # the simulation bone is re-derived from Spine2 and the Hips, so only the body is compared
    return np.concatenate(distances)[:, 1:], again


@pytest.fixture(scope="module")
def clip_text(tmp_path_factory):
    """Text of a valid LaFAN1-style BVH file (60 source frames) exported from smooth motion."""
    database = database_build.build_database([smooth_clip(107)], mirror=False)
    path = tmp_path_factory.mktemp("bvh") / "clip.bvh"
    bvh.write_bvh(path, bvh_export.range_to_bvh(database, 0))
    return path.read_text()


def write(tmp_path, text):
    path = tmp_path / "clip.bvh"
    path.write_text(text)
    return path


def line_of(text, needle):
    """1-based number of the first line containing ``needle``."""
    return next(number for number, line in enumerate(text.splitlines(), 1) if needle in line)


def test_exported_file_is_lafan1_style(clip_text, tmp_path):
    parsed = bvh.read_bvh(write(tmp_path, clip_text))
    assert parsed.names == list(bvh_import.LAFAN1_NAMES) and "Simulation" not in parsed.names
    assert parsed.channels[0] == ("Xposition", "Yposition", "Zposition", "Zrotation", "Yrotation", "Xrotation")
    assert all(channels == ("Zrotation", "Yrotation", "Xrotation") for channels in parsed.channels[1:])
    assert parsed.nframes == 60 and abs(parsed.frame_time - 1 / 30) < 1e-6
    assert 80 < parsed.motion[:, 1].mean() < 100  # Hips height 0.9 m in centimetres


def test_import_resamples_30_to_60_fps_like_the_toolkit(clip_text, tmp_path):
    database = bvh_import.database_from_bvh_files([write(tmp_path, clip_text)])
    assert database.range_stops.tolist() == [107, 214]  # int(0.9 * (2 * 60 - 1)), then its mirror
    rng = np.random.default_rng(0)
    values = rng.standard_normal((60, 2, 4))
    times = np.linspace(0, 59, 107)
    expected = griddata(np.arange(60.0), values.reshape(60, -1), times, method="cubic").reshape(107, 2, 4)
    positions, rotations = bvh_import.resample(values[..., :3], values)
    np.testing.assert_allclose(positions, expected[..., :3], atol=1e-12)
    np.testing.assert_allclose(rotations, quat.normalize(expected), atol=1e-12)


def test_simulation_bone_is_spine2_on_the_ground_facing_hips_forward(clip_text, tmp_path):
    parsed = bvh.read_bvh(write(tmp_path, clip_text))
    hips = parsed.channel_columns(0)
    time = np.arange(parsed.nframes)
    # a still pose walking straight along +x at 40 cm per frame with the Hips' +Y axis turned to +x
    parsed.motion[:] = 0.0
    parsed.motion[:, hips] = np.stack([40.0 * time, 90 + 0 * time, 5 + 0 * time, -90 + 0 * time,
                                       0 * time, 0 * time], axis=1)
    positions, rotations = bvh_import.clip_from_bvh(parsed, path="clip.bvh")
    yaw = quat.from_angle_axis(np.array(np.pi / 2), np.array([0.0, 1.0, 0.0]))
    np.testing.assert_allclose(np.abs(np.sum(rotations[:, 0] * yaw, axis=-1)), 1.0, atol=1e-9)
    spine2 = quat.forward_kinematics(positions, rotations, skeleton.BONE_PARENTS)[0][:, skeleton.SPINE2]
    np.testing.assert_allclose(positions[:, 0], spine2 * [1, 0, 1], atol=1e-9)
    # 59 source frames of 0.4 m played in 106 frames at 60 fps: 10% faster than the 12 m/s at 30 fps
    speed = np.linalg.norm(np.diff(positions[:, 0], axis=0), axis=-1) * 60
    np.testing.assert_allclose(speed, 0.4 * 59 / 106 * 60, rtol=1e-9)


def test_simulation_bone_uses_the_toolkits_filters(clip_text, tmp_path):
    positions, rotations = bvh_import.clip_from_bvh(bvh.read_bvh(write(tmp_path, clip_text)), path="clip.bvh")
    world_positions, world_rotations = quat.forward_kinematics(positions, rotations, skeleton.BONE_PARENTS)
    # generate_database.py: savgol_filter(..., 31, 3) on the position, (..., 61, 3) on the direction
    expected = savgol_filter(world_positions[:, skeleton.SPINE2] * [1, 0, 1], 31, 3, axis=0, mode="interp")
    np.testing.assert_allclose(positions[:, 0], expected, atol=1e-9)
    forward = quat.mul_vec(world_rotations[:, skeleton.HIPS], np.array([0.0, 1.0, 0.0])) * [1, 0, 1]
    forward /= np.linalg.norm(forward, axis=-1, keepdims=True)
    forward = savgol_filter(forward, 61, 3, axis=0, mode="interp")
    forward /= np.linalg.norm(forward, axis=-1, keepdims=True)
    np.testing.assert_allclose(quat.mul_vec(rotations[:, 0], np.array([0.0, 0.0, 1.0])), forward, atol=1e-9)


def test_windows_select_source_frames(clip_text, tmp_path):
    path = write(tmp_path, clip_text)
    whole = bvh_import.database_from_bvh_files([path])
    part = bvh_import.database_from_bvh_files([path, path], windows=[(10, 50), None])
    assert part.range_stops.tolist() == [71, 178, 249, 356]
    parsed = bvh.read_bvh(path)
    parsed.motion = parsed.motion[10:50]
    alone, _ = bvh_import.clip_from_bvh(parsed, path=path)
    np.testing.assert_allclose(part.bone_positions[:71], alone.astype(np.float32), atol=1e-6)
    np.testing.assert_array_equal(part.bone_positions[71:178], whole.bone_positions[:107])


def test_window_outside_the_motion_names_the_first_frame_line(clip_text, tmp_path):
    path = write(tmp_path, clip_text)
    first = line_of(clip_text, "Frame Time") + 1
    with pytest.raises(BvhError) as caught:
        bvh_import.database_from_bvh_files([path], windows=[(50, 61)])
    assert str(caught.value) == f"{path}: line {first}: window 50:61 is not within the motion block's 60 frames"
    with pytest.raises(BvhError, match=f"line {first}: 3 frames \\(window 5:8\\); import needs at least 4"):
        bvh_import.database_from_bvh_files([path], windows=[(5, 8)])


def edit_text(text, old, new):
    assert old in text
    return text.replace(old, new, 1)


def drop_joint(text, name):
    """Remove joint ``name`` (a leaf with an End Site) and its motion column triple."""
    lines = text.splitlines()
    first = line_of(text, f"JOINT {name}") - 1
    depth = lines[first].index("J")
    last = next(index for index in range(first + 1, len(lines)) if lines[index] == "\t" * depth + "}")
    parsed = bvh.parse_bvh(text)
    columns = parsed.channel_columns(parsed.names.index(name))
    frames_at = line_of(text, "Frame Time")
    frames = [" ".join(np.delete(line.split(), np.arange(columns.start, columns.stop)))
              for line in lines[frames_at:]]
    return "\n".join(lines[:first] + lines[last + 1:frames_at] + frames) + "\n"


def at(needle, shift=0):
    """A function giving the line of ``needle`` in a text, plus ``shift``."""
    return lambda text: line_of(text, needle) + shift


BAD_CLIPS = {
    "unknown joint": (lambda text: edit_text(text, "JOINT Neck", "JOINT Nek"), at("JOINT Nek"),
                      "unknown joint 'Nek': LaFAN1-style import expects exactly the toolkit's joints"),
    "missing joint": (lambda text: drop_joint(text, "RightToe"), at("MOTION", -1),
                      "hierarchy ends without joint 'RightToe' (LaFAN1-style import needs all 22"),
    "wrong parent": (lambda text: edit_text(edit_text(text, "JOINT LeftToe", "JOINT Right_Toe"),
                                            "JOINT RightToe", "JOINT LeftToe").replace("Right_Toe", "RightToe"),
                     at("JOINT RightToe"), "joint 'RightToe' has parent 'LeftFoot', the toolkit skeleton has it "
                                           "under 'RightFoot'"),
    "joint channels": (lambda text: edit_text(text, "CHANNELS 3 Zrotation", "CHANNELS 3 Xposition"),
                       at("CHANNELS 3 Xposition"), "joint 'LeftUpLeg' has 3 channels (Xposition Yrotation "
                                                   "Xrotation); LaFAN1-style import expects 3 rotation channels"),
    "frame rate": (lambda text: edit_text(text, "Frame Time: 0.033333", "Frame Time: 0.016667"),
                   at("Frame Time"), "frame time 0.016667 s (60 fps); the toolkit's pipeline resamples 30 fps"),
}


@pytest.mark.parametrize("case", sorted(BAD_CLIPS))
def test_bad_clip_names_file_and_line(clip_text, tmp_path, case):
    edit, line, problem = BAD_CLIPS[case]
    text = edit(clip_text)
    path = write(tmp_path, text)
    with pytest.raises(BvhError) as caught:
        bvh_import.database_from_bvh_files([path])
    assert str(caught.value).startswith(f"{path}: line {line(text)}: {problem}")


def test_smooth_motion_survives_export_and_import_within_10_micrometres(tmp_path):
    distances, again = round_trip_errors(smooth_database(), tmp_path)
    # two cubic resamplings of motion at most 4 rad/s (measured: 2 micrometres), then float32 storage
    assert distances.max() < 1e-5
    computed = features.compute_features(again).features
    assert np.isfinite(computed).all() and (computed.std(axis=0) > 0.1).all()


def test_synthetic_database_survives_export_and_import(tmp_path):
    synthetic = pytest.importorskip("motion_matching.data.synthetic.locomotion")
    database = synthetic.generate_synthetic_database(seed=0, nframes=1200)
    distances, again = round_trip_errors(database, tmp_path)
    assert distances[:, HIPS].max() < 1e-3
    # the procedural gait has kinks (knees snapping straight) that a 30 fps spline smooths: feet
    # stay within 2 cm on 99% of frames and within 1 mm on half of them
    feet = distances[:, FEET]
    assert np.percentile(feet, 99) < 0.02 and np.median(feet) < 1e-3
    computed = features.compute_features(again).features
    assert np.isfinite(computed).all() and (computed.std(axis=0) > 0.1).all()


def test_lafan1_motion_capture_survives_export_and_import(tmp_path):
    database = formats.load_database(shared_fixture("reference-features", "database.bin"))
    distances, _ = round_trip_errors(database, tmp_path)
    # real capture at 60 fps resampled at 1.8-frame spacing and back: a few millimetres at most
    assert distances[:, HIPS].max() < 5e-3
    assert distances[:, FEET].max() < 1e-2 and np.median(distances[:, FEET]) < 5e-4


def test_export_writes_chosen_ranges_and_refuses_other_skeletons(tmp_path):
    database = smooth_database()
    written = bvh_export.write_database_bvh(database, tmp_path / "out", ranges=[1, 3])
    assert [path.rsplit("/", 1)[1] for path in written] == ["range_001.bvh", "range_003.bvh"]
    assert bvh.read_bvh(written[1]).nframes == bvh_export.source_length(150)
    with pytest.raises(ValueError, match="range 4 does not exist: the database has 4 ranges"):
        bvh_export.write_database_bvh(database, tmp_path / "out", ranges=[4])
    database.bone_parents = database.bone_parents.copy()
    database.bone_parents[5] = 3
    with pytest.raises(InvalidFile, match="BVH export needs the toolkit's 23-bone skeleton"):
        bvh_export.write_database_bvh(database, tmp_path / "other")


def test_vertical_hips_forward_axis_names_the_frame_line(clip_text, tmp_path):
    parsed = bvh.read_bvh(write(tmp_path, clip_text))
    parsed.motion[:, 3:6] = 0.0  # Hips unrotated: their forward (+Y) axis points straight up
    bvh.write_bvh(tmp_path / "upright.bvh", parsed)
    with pytest.raises(BvhError) as caught:
        bvh_import.database_from_bvh_files([tmp_path / "upright.bvh"])
    first = line_of(clip_text, "Frame Time") + 1
    assert str(caught.value) == (f"{tmp_path / 'upright.bvh'}: line {first}: the Hips forward (local +Y) axis is "
                                 "vertical, so the clip has no facing direction for the simulation bone")


def test_export_refuses_ranges_too_short_to_import(tmp_path):
    database = database_build.build_database([smooth_clip(5)], mirror=False)
    with pytest.raises(InvalidFile, match="range 0 has 5 frames; BVH export needs at least 6"):
        bvh_export.write_database_bvh(database, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cli_reports_a_bad_clip_as_one_error_line(clip_text, tmp_path):
    # imported here: the CLI package loads every command module, so only this test depends on them all
    from motion_matching.cli import main
    path = write(tmp_path, edit_text(clip_text, "JOINT Neck", "JOINT Nek"))
    result = CliRunner().invoke(main, ["generate-database", "--out", str(tmp_path / "out"), "--bvh", str(path)])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {path}: line {line_of(clip_text, 'JOINT Neck')}: unknown joint 'Nek'")
    assert result.output.count("\n") == 1 and not (tmp_path / "out" / "database.bin").exists()
