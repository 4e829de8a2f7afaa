"""The toolkit's binary files: database.bin, features.bin, latent.bin and network .bin.

Every reader checks each byte count, refuses trailing bytes, NaN and Inf, and raises an error naming
the file and the problem; every writer is atomic.
"""
import dataclasses

import numpy as np

from motion_matching.atomic import atomic_write
from motion_matching.errors import InvalidFile, MismatchedFiles
from motion_matching.toolkit.binary_io import BinaryReader, open_for_reading, write_array, write_counts
from motion_matching.toolkit.sniff import recognised


@dataclasses.dataclass
class Database:
    """The animation database: per-frame local (parent-relative) bone states.

    Bone 0, the simulation bone, is in world space.
    """

    bone_positions: np.ndarray          # (F, B, 3) float32, metres
    bone_velocities: np.ndarray         # (F, B, 3) float32, metres / second
    bone_rotations: np.ndarray          # (F, B, 4) float32 quaternions, w x y z
    bone_angular_velocities: np.ndarray  # (F, B, 3) float32, radians / second
    bone_parents: np.ndarray            # (B,) int32, -1 for the root
    range_starts: np.ndarray            # (R,) int32, first frame of each clip
    range_stops: np.ndarray             # (R,) int32, one past the last frame of each clip
    contact_states: np.ndarray          # (F, C) uint8, 1 where the contact bone touches the ground

    @property
    def nframes(self):
        return self.bone_positions.shape[0]

    @property
    def nbones(self):
        return self.bone_positions.shape[1]


@dataclasses.dataclass
class Features:
    """Normalised matching features (F, n) float32 with the per-column offset and scale used."""

    features: np.ndarray
    offset: np.ndarray
    scale: np.ndarray


@dataclasses.dataclass
class Network:
    """A network in the runtime's layout: normalisation vectors and (weights (in, out), bias (out,)) layers."""

    mean_in: np.ndarray
    std_in: np.ndarray
    mean_out: np.ndarray
    std_out: np.ndarray
    layers: list

    @property
    def sizes(self):
        """Layer widths from input to output, e.g. [27, 512, 512, 512, 512, 59]."""
        return [self.layers[0][0].shape[0]] + [bias.shape[0] for _, bias in self.layers]


_BONE_ARRAYS = (("bone_positions", 3), ("bone_velocities", 3), ("bone_rotations", 4),
                ("bone_angular_velocities", 3))


@recognised("database.bin")
def load_database(path):
    """Read ``database.bin``; returns a validated ``Database``."""
    with open_for_reading(path) as stream:
        reader = BinaryReader(path, stream)
        arrays = {}
        for name, width in _BONE_ARRAYS:
            frames, bones = reader.counts(name, 2)
            arrays[name] = reader.array(name, "<f4", (frames, bones, width))
        arrays["bone_parents"] = reader.array1d("bone_parents", "<i4")
        arrays["range_starts"] = reader.array1d("range_starts", "<i4")
        arrays["range_stops"] = reader.array1d("range_stops", "<i4")
        arrays["contact_states"] = reader.array2d("contact_states", "u1")
        reader.finish()
    database = Database(**arrays)
    validate_database(database, path)
    return database


def validate_database(database, path):
    """Raise ``InvalidFile`` unless counts agree, parents precede children and ranges tile the frames."""
    frames, bones = database.bone_positions.shape[:2]
    for name, _ in _BONE_ARRAYS[1:]:
        shape = getattr(database, name).shape[:2]
        if shape != (frames, bones):
            raise InvalidFile(path, f"{name} has {shape[0]} frames x {shape[1]} bones, "
                                    f"bone_positions has {frames} x {bones}")
    if database.bone_parents.shape[0] != bones:
        raise InvalidFile(path, f"bone_parents has {database.bone_parents.shape[0]} entries for {bones} bones")
    for bone, parent in enumerate(database.bone_parents):
        if parent >= bone or parent < -1:
            raise InvalidFile(path, f"bone {bone} has parent {parent}: a parent must come before its child")
    if database.contact_states.shape[0] != frames:
        raise InvalidFile(path, f"contact_states has {database.contact_states.shape[0]} frames, "
                                f"bone_positions has {frames}")
    validate_ranges(database.range_starts, database.range_stops, frames, path)


def validate_ranges(starts, stops, nframes, path):
    """Raise ``InvalidFile`` unless the ranges are non-empty, in order, and cover frames 0..nframes exactly."""
    if starts.shape != stops.shape:
        raise InvalidFile(path, f"{starts.shape[0]} range starts but {stops.shape[0]} range stops")
    expected_start = 0
    for index, (start, stop) in enumerate(zip(starts.tolist(), stops.tolist())):
        if stop <= start:
            raise InvalidFile(path, f"range {index} goes backwards or is empty: start {start}, stop {stop}")
        if start < expected_start:
            raise InvalidFile(path, f"range {index} starting at frame {start} overlaps the range before it")
        if start > expected_start:
            raise InvalidFile(path, f"frames {expected_start}..{start - 1} are in no range")
        expected_start = stop
    if expected_start != nframes:
        raise InvalidFile(path, f"ranges cover frames 0..{expected_start - 1} of {nframes} frames")


def save_database(path, database):
    """Write ``database`` to ``path`` atomically in the toolkit's layout."""
    with atomic_write(path) as stream:
        for name, _ in _BONE_ARRAYS:
            values = getattr(database, name)
            write_array(stream, values.shape[:2], values, "<f4")
        for name in ("bone_parents", "range_starts", "range_stops"):
            values = getattr(database, name)
            write_array(stream, values.shape, values, "<i4")
        write_array(stream, database.contact_states.shape, database.contact_states, "u1")


@recognised("features.bin")
def load_features(path):
    """Read ``features.bin``; returns ``Features`` with features (F, n), offset (n,), scale (n,)."""
    with open_for_reading(path) as stream:
        reader = BinaryReader(path, stream)
        features = reader.array2d("features", "<f4")
        offset = reader.array1d("feature offset", "<f4")
        scale = reader.array1d("feature scale", "<f4")
        reader.finish()
    for name, vector in (("offset", offset), ("scale", scale)):
        if vector.shape[0] != features.shape[1]:
            raise InvalidFile(path, f"feature {name} has {vector.shape[0]} values for {features.shape[1]} features")
    return Features(features, offset, scale)


def save_features(path, features):
    """Write ``Features`` to ``path`` atomically."""
    with atomic_write(path) as stream:
        write_array(stream, features.features.shape, features.features, "<f4")
        write_array(stream, features.offset.shape, features.offset, "<f4")
        write_array(stream, features.scale.shape, features.scale, "<f4")


@recognised("latent.bin")
def load_latent(path):
    """Read ``latent.bin``; returns the latent (F, L) float32."""
    with open_for_reading(path) as stream:
        reader = BinaryReader(path, stream)
        latent = reader.array2d("latent", "<f4")
        reader.finish()
    return latent


def save_latent(path, latent):
    """Write the latent (F, L) to ``path`` atomically."""
    with atomic_write(path) as stream:
        write_array(stream, latent.shape, latent, "<f4")


def load_features_and_latent(features_path, latent_path):
    """Read both files and check they describe the same frames; returns (Features, latent)."""
    features = load_features(features_path)
    latent = load_latent(latent_path)
    if latent.shape[0] != features.features.shape[0]:
        raise MismatchedFiles(latent_path, f"has {latent.shape[0]} frames but {features_path} has "
                                           f"{features.features.shape[0]}")
    return features, latent


@recognised("network .bin")
def load_network(path):
    """Read a network ``.bin``; returns a validated ``Network``."""
    with open_for_reading(path) as stream:
        reader = BinaryReader(path, stream)
        vectors = [reader.array1d(name, "<f4") for name in ("mean_in", "std_in", "mean_out", "std_out")]
        (nlayers,) = reader.counts("layer count", 1)
        layers = []
        for index in range(nlayers):
            weights = reader.array2d(f"layer {index} weights", "<f4")
            bias = reader.array1d(f"layer {index} bias", "<f4")
            layers.append((weights, bias))
        reader.finish()
    network = Network(*vectors, layers)
    validate_network(network, path)
    return network


def validate_network(network, path):
    """Raise ``InvalidFile`` unless layer sizes chain and match the normalisation vectors."""
    if not network.layers:
        raise InvalidFile(path, "network has no layers")
    if network.mean_in.shape != network.std_in.shape or network.mean_out.shape != network.std_out.shape:
        raise InvalidFile(path, "mean and std vectors differ in length")
    width = network.mean_in.shape[0]
    for index, (weights, bias) in enumerate(network.layers):
        if weights.shape[0] != width:
            raise InvalidFile(path, f"layer {index} takes {weights.shape[0]} inputs but receives {width}")
        if bias.shape[0] != weights.shape[1]:
            raise InvalidFile(path, f"layer {index} has {weights.shape[1]} outputs but {bias.shape[0]} biases")
        width = weights.shape[1]
    if width != network.mean_out.shape[0]:
        raise InvalidFile(path, f"network outputs {width} values but mean_out has {network.mean_out.shape[0]}")


def save_network(path, network):
    """Write ``network`` to ``path`` atomically in the runtime's layout."""
    with atomic_write(path) as stream:
        for vector in (network.mean_in, network.std_in, network.mean_out, network.std_out):
            write_array(stream, vector.shape, vector, "<f4")
        write_counts(stream, len(network.layers))
        for weights, bias in network.layers:
            write_array(stream, weights.shape, weights, "<f4")
            write_array(stream, bias.shape, bias, "<f4")
