"""Small valid toolkit files and the byte offsets of their fields, for tampering tests."""
import numpy as np

from motion_matching.toolkit import formats


def small_database(nframes=10, parents=(-1, 0, 1, 1), ranges=((0, 6), (6, 10)), ncontacts=2, seed=0):
    """A tiny valid ``Database`` with random finite values."""
    rng = np.random.default_rng(seed)
    nbones = len(parents)

    def bones(width):
        return rng.standard_normal((nframes, nbones, width)).astype(np.float32)

    return formats.Database(
        bone_positions=bones(3), bone_velocities=bones(3), bone_rotations=bones(4),
        bone_angular_velocities=bones(3), bone_parents=np.array(parents, np.int32),
        range_starts=np.array([r[0] for r in ranges], np.int32),
        range_stops=np.array([r[1] for r in ranges], np.int32),
        contact_states=rng.integers(0, 2, (nframes, ncontacts)).astype(np.uint8))


def database_fields(database):
    """[(field, header offset, data offset, end offset)] of a database file's fields in byte order."""
    frames, bones = database.bone_positions.shape[:2]
    sizes = [("bone_positions", 8, frames * bones * 12), ("bone_velocities", 8, frames * bones * 12),
             ("bone_rotations", 8, frames * bones * 16), ("bone_angular_velocities", 8, frames * bones * 12),
             ("bone_parents", 4, bones * 4), ("range_starts", 4, database.range_starts.size * 4),
             ("range_stops", 4, database.range_stops.size * 4),
             ("contact_states", 8, database.contact_states.size)]
    return _offsets(sizes)


def features_fields(features):
    """Byte offsets of a features.bin's fields, as ``database_fields``."""
    n = features.features.shape[1]
    return _offsets([("features", 8, features.features.size * 4), ("feature offset", 4, n * 4),
                     ("feature scale", 4, n * 4)])


def network_fields(network):
    """Byte offsets of a network .bin's fields, as ``database_fields``."""
    sizes = [(name, 4, getattr(network, name).size * 4) for name in ("mean_in", "std_in", "mean_out", "std_out")]
    sizes.append(("layer count", 4, 0))
    for index, (weights, bias) in enumerate(network.layers):
        sizes += [(f"layer {index} weights", 8, weights.size * 4), (f"layer {index} bias", 4, bias.size * 4)]
    return _offsets(sizes)


def _offsets(sizes):
    fields, offset = [], 0
    for name, header, data in sizes:
        fields.append((name, offset, offset + header, offset + header + data))
        offset += header + data
    return fields


def small_network(sizes=(3, 5, 4), seed=0):
    """A tiny valid ``Network`` with random weights."""
    rng = np.random.default_rng(seed)
    layers = [(rng.standard_normal((a, b)).astype(np.float32), rng.standard_normal(b).astype(np.float32))
              for a, b in zip(sizes[:-1], sizes[1:])]
    return formats.Network(rng.standard_normal(sizes[0]).astype(np.float32), np.ones(sizes[0], np.float32),
                           rng.standard_normal(sizes[-1]).astype(np.float32), np.ones(sizes[-1], np.float32),
                           layers)
