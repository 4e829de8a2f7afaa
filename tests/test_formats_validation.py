"""Every kind of bad toolkit file gets a clear error naming the file and the problem."""
import numpy as np
import pytest

from motion_matching import errors
from motion_matching.toolkit import formats

from formats_helpers import database_fields, features_fields, network_fields, small_database, small_network


def write_database(tmp_path, **changes):
    database = small_database(**changes)
    path = tmp_path / "database.bin"
    formats.save_database(path, database)
    return path, database


def cut(path, size):
    path.write_bytes(path.read_bytes()[:size])


def expect(error_type, load, path, *fragments):
    with pytest.raises(error_type) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message
    return message


def test_missing_file(tmp_path):
    expect(errors.MissingFile, formats.load_database, tmp_path / "database.bin", "no such file")


DATABASE_FIELDS = [field[0] for field in database_fields(small_database())]


@pytest.mark.parametrize("field", DATABASE_FIELDS)
def test_database_truncated_inside_header(tmp_path, field):
    path, database = write_database(tmp_path)
    header = dict((f[0], f[1:]) for f in database_fields(database))[field][0]
    cut(path, header + 2)
    expect(errors.TruncatedFile, formats.load_database, path, f"{field} header")


@pytest.mark.parametrize("field", DATABASE_FIELDS)
def test_database_truncated_inside_array(tmp_path, field):
    path, database = write_database(tmp_path)
    _, data, end = dict((f[0], f[1:]) for f in database_fields(database))[field]
    cut(path, data + (end - data) // 2)
    expect(errors.TruncatedFile, formats.load_database, path, f"truncated in {field}")


FEATURES_FIELDS = features_fields(formats.Features(np.zeros((4, 3)), np.zeros(3), np.zeros(3)))


@pytest.mark.parametrize("field", [f[0] for f in FEATURES_FIELDS])
@pytest.mark.parametrize("where", ["header", "array"])
def test_features_truncated(tmp_path, field, where):
    features = formats.Features(np.ones((4, 3), np.float32), np.zeros(3, np.float32), np.ones(3, np.float32))
    path = tmp_path / "features.bin"
    formats.save_features(path, features)
    header, data, end = dict((f[0], f[1:]) for f in features_fields(features))[field]
    cut(path, header + 2 if where == "header" else data + (end - data) // 2)
    expect(errors.TruncatedFile, formats.load_features, path, field)


@pytest.mark.parametrize("field", [f[0] for f in network_fields(small_network())])
def test_network_truncated(tmp_path, field):
    network = small_network()
    path = tmp_path / "net.bin"
    formats.save_network(path, network)
    header, data, end = dict((f[0], f[1:]) for f in network_fields(network))[field]
    cut(path, header + 2 if data == end else data + (end - data) // 2)
    expect(errors.TruncatedFile, formats.load_network, path, field)


def test_latent_truncated(tmp_path):
    path = tmp_path / "latent.bin"
    formats.save_latent(path, np.ones((4, 32), np.float32))
    cut(path, 8 + 100)
    expect(errors.TruncatedFile, formats.load_latent, path, "truncated in latent")


@pytest.mark.parametrize("load, save, value", [
    (formats.load_database, formats.save_database, small_database()),
    (formats.load_latent, formats.save_latent, np.ones((3, 2), np.float32)),
    (formats.load_network, formats.save_network, small_network()),
])
def test_trailing_bytes(tmp_path, load, save, value):
    path = tmp_path / "file.bin"
    save(path, value)
    path.write_bytes(path.read_bytes() + b"\0\0\0")
    expect(errors.InvalidFile, load, path, "3 trailing bytes")


def test_velocity_frame_count_differs(tmp_path):
    database = small_database()
    database.bone_velocities = database.bone_velocities[:-1]
    path = tmp_path / "database.bin"
    formats.save_database(path, database)
    expect(errors.InvalidFile, formats.load_database, path, "bone_velocities has 9 frames")


def test_contact_frame_count_differs(tmp_path):
    database = small_database()
    database.contact_states = database.contact_states[:-2]
    path = tmp_path / "database.bin"
    formats.save_database(path, database)
    expect(errors.InvalidFile, formats.load_database, path, "contact_states has 8 frames")


def test_feature_offset_length_differs(tmp_path):
    path = tmp_path / "features.bin"
    formats.save_features(path, formats.Features(np.ones((4, 3), np.float32), np.zeros(2, np.float32),
                                                 np.ones(3, np.float32)))
    expect(errors.InvalidFile, formats.load_features, path, "feature offset has 2 values for 3 features")


@pytest.mark.parametrize("parents, bone", [((-1, 0, 2, 1), 2), ((-1, 0, 1, 3), 3), ((0, 0, 1, 1), 0)])
def test_parent_not_before_child(tmp_path, parents, bone):
    path, _ = write_database(tmp_path, parents=parents)
    expect(errors.InvalidFile, formats.load_database, path, f"bone {bone} has parent")


@pytest.mark.parametrize("ranges, problem", [
    (((0, 6), (5, 10)), "overlaps"),
    (((0, 6), (6, 4), (4, 10)), "goes backwards"),
    (((0, 5), (6, 10)), "frames 5..5 are in no range"),
    (((0, 6), (6, 9)), "ranges cover frames 0..8 of 10 frames"),
    (((1, 6), (6, 10)), "frames 0..0 are in no range"),
])
def test_bad_ranges(tmp_path, ranges, problem):
    path, _ = write_database(tmp_path, ranges=ranges)
    expect(errors.InvalidFile, formats.load_database, path, problem)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("field", ["bone_positions", "bone_rotations", "bone_angular_velocities"])
def test_nan_or_inf_in_database(tmp_path, bad, field):
    database = small_database()
    getattr(database, field)[3, 1, 2] = bad
    path = tmp_path / "database.bin"
    formats.save_database(path, database)
    expect(errors.InvalidFile, formats.load_database, path, f"{field} holds NaN or Inf")


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_or_inf_in_features_and_network(tmp_path, bad):
    features = np.ones((4, 3), np.float32)
    features[2, 1] = bad
    formats.save_features(tmp_path / "features.bin", formats.Features(features, np.zeros(3), np.ones(3)))
    expect(errors.InvalidFile, formats.load_features, tmp_path / "features.bin", "features holds NaN or Inf")
    network = small_network()
    network.layers[1][0][0, 0] = bad
    formats.save_network(tmp_path / "net.bin", network)
    expect(errors.InvalidFile, formats.load_network, tmp_path / "net.bin", "layer 1 weights holds NaN or Inf")


def test_features_and_latent_frame_counts_differ(tmp_path):
    formats.save_features(tmp_path / "features.bin",
                          formats.Features(np.ones((4, 3), np.float32), np.zeros(3), np.ones(3)))
    formats.save_latent(tmp_path / "latent.bin", np.ones((5, 32), np.float32))
    with pytest.raises(errors.MismatchedFiles) as caught:
        formats.load_features_and_latent(tmp_path / "features.bin", tmp_path / "latent.bin")
    assert str(caught.value) == f"{tmp_path / 'latent.bin'}: has 5 frames but {tmp_path / 'features.bin'} has 4"


def test_network_layers_that_do_not_chain(tmp_path):
    network = small_network()
    network.layers[1] = (np.ones((4, 4), np.float32), np.ones(4, np.float32))
    formats.save_network(tmp_path / "net.bin", network)
    expect(errors.InvalidFile, formats.load_network, tmp_path / "net.bin", "layer 1 takes 4 inputs but receives 5")


def test_huge_header_count_is_truncation_not_allocation(tmp_path):
    path = tmp_path / "latent.bin"
    path.write_bytes(np.array([2**31, 2**31], np.uint32).tobytes() + b"\0" * 16)
    expect(errors.TruncatedFile, formats.load_latent, path, "truncated in latent")


def test_huge_finite_values_are_not_mistaken_for_inf(tmp_path):
    latent = np.full((4, 8), 3e38, np.float32)
    formats.save_latent(tmp_path / "latent.bin", latent)
    assert np.array_equal(formats.load_latent(tmp_path / "latent.bin"), latent)
