"""The plain-C reference evaluator (tools/nnet_eval.c): agreement with torch, exact search, clean refusals."""
import struct

import numpy as np
import pytest

from motion_matching.projector import c_evaluator
from motion_matching.projector.export import export_network
from motion_matching.toolkit import formats

from conftest import TOOLKIT_NETWORKS, random_features
from export_helpers import random_projector, realistic_queries, torch_outputs, write_checkpoint

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    """The C evaluator compiled with the system compiler (strict warnings), or skip if there is none."""
    if c_evaluator.find_compiler() is None:
        pytest.skip("no C compiler (cc or $CC) on this machine: the C reference evaluator cannot be built")
    flags = ("-std=c99", "-O2", "-Wall", "-Wextra", "-pedantic", "-Werror")
    return c_evaluator.build_c_evaluator(tmp_path_factory.mktemp("c"), flags=flags)


def assert_agrees(evaluator, network_path, tmp_path, *, count=300):
    """C outputs within TOLERANCE of torch's, relative to each output column's largest magnitude (>= 1)."""
    network = formats.load_network(network_path)
    queries = realistic_queries(network, count)
    expected = torch_outputs(formats_module(network), queries)
    actual = c_evaluator.c_network_outputs(evaluator, network_path, queries, workdir=tmp_path)
    assert actual.shape == expected.shape
    scale = np.maximum(1.0, np.abs(expected).max(axis=0))
    assert np.all(np.abs(actual - expected) <= TOLERANCE * scale), np.abs(actual - expected).max()


def formats_module(network):
    from motion_matching.projector.model import network_to_module
    return network_to_module(network).eval()


@pytest.mark.parametrize("name", ["projector", "stepper", "decompressor"])
def test_agrees_with_torch_on_toolkit_networks(evaluator, tmp_path, name):
    assert_agrees(evaluator, TOOLKIT_NETWORKS / f"{name}.bin", tmp_path)


def test_agrees_with_torch_on_a_freshly_exported_network(evaluator, tmp_path):
    module = random_projector(seed=7)
    export_network(write_checkpoint(tmp_path / "run.pt", module), tmp_path / "projector.bin")
    queries = np.random.default_rng(7).standard_normal((200, 27)).astype(np.float32)
    actual = c_evaluator.c_network_outputs(evaluator, tmp_path / "projector.bin", queries, workdir=tmp_path)
    expected = torch_outputs(module, queries)
    assert np.all(np.abs(actual - expected) <= TOLERANCE * np.maximum(1.0, np.abs(expected).max(0)))


def test_nearest_is_the_exact_brute_force_minimum(evaluator, tmp_path):
    frames = random_features(500, seed=4)
    queries = frames[np.random.default_rng(4).integers(0, 500, 300)] + np.random.default_rng(5).normal(
        scale=0.5, size=(300, 27)).astype(np.float32)
    c_evaluator.write_matrix(tmp_path / "frames.bin", frames)
    c_evaluator.write_matrix(tmp_path / "queries.bin", queries)
    done = c_evaluator.run_c_evaluator(evaluator, "nearest", tmp_path / "frames.bin", tmp_path / "queries.bin",
                                       tmp_path / "nearest.bin")
    assert done.returncode == 0, done.stderr
    found = c_evaluator.read_indices(tmp_path / "nearest.bin")
    distances = np.square(queries[:, None, :].astype(np.float64) - frames[None].astype(np.float64)).sum(-1)
    best = distances.min(1)
    chosen = distances[np.arange(300), found]
    assert np.all(chosen <= best * (1 + 1e-5) + 1e-9)


def test_repeats_time_every_pass(evaluator, tmp_path):
    c_evaluator.write_matrix(tmp_path / "q.bin", np.zeros((10, 59), np.float32))
    done = c_evaluator.run_c_evaluator(evaluator, "eval", TOOLKIT_NETWORKS / "stepper.bin", tmp_path / "q.bin", "-",
                                       repeats=3)
    assert done.returncode == 0, done.stderr
    seconds = c_evaluator.parse_pass_seconds(done.stdout)
    assert len(seconds) == 3 and all(value > 0 for value in seconds)
    assert not (tmp_path / "-").exists()


# --- damaged files: every case must end in exit status 2 and one message naming the file, never a crash


def _u32(value):
    return struct.pack("<I", value)


def _stepper_bytes():
    return (TOOLKIT_NETWORKS / "stepper.bin").read_bytes()


def _vector(values):
    return _u32(len(values)) + struct.pack(f"<{len(values)}f", *values)


def _small_network_bytes(*, nlayers=2, rows=2, nbias=3, first=1.0, tail=b""):
    """A 2 -> 3 -> 2 network; ``rows``/``nbias`` change layer 0's counts (with matching data)."""
    ones = [1.0, 1.0]
    body = _vector(ones) + _vector(ones) + _vector(ones) + _vector(ones) + _u32(nlayers)
    body += _u32(rows) + _u32(3) + struct.pack(f"<{3 * rows}f", first, *range(1, 3 * rows)) + _vector([0.5] * nbias)
    body += _u32(3) + _u32(2) + struct.pack("<6f", *range(6)) + _vector(ones)
    return body + tail


DAMAGED = {
    "missing": (None, "cannot open for reading"),
    "empty": (b"", "truncated in mean_in at byte 0: needs 4 bytes, 0 left"),
    "cut in a header": (_stepper_bytes()[:2], "truncated in mean_in at byte 0: needs 4 bytes, 2 left"),
    "cut in the weights": (_stepper_bytes()[:5000], "truncated in layer 0 weights at byte 972: needs 30208 floats"),
    "cut by one byte": (_stepper_bytes()[:-1],
                        "truncated in layer 2 bias at byte 1295336: needs 59 floats, 235 bytes left"),
    "huge layer count": (_small_network_bytes(nlayers=0xFFFFFFFF), "truncated in layer headers at byte 52"),
    "no layers": (_small_network_bytes(nlayers=0), "network has no layers"),
    "huge rows and cols": (_small_network_bytes()[:52] + _u32(0xFFFFFFFF) * 2 + _small_network_bytes()[60:],
                           "truncated in layer 0 weights at byte 60: needs 18446744065119617025 floats"),
    "rows do not chain": (_small_network_bytes(rows=1), "layer 0 takes 1 inputs but receives 2"),
    "bias count wrong": (_small_network_bytes(nbias=4), "layer 0 has 3 outputs but 4 biases"),
    "trailing bytes": (_small_network_bytes(tail=b"\0\0"), "2 trailing bytes after byte"),
    "NaN weight": (_small_network_bytes(first=float("nan")), "layer 0 weights holds NaN or Inf (first at element 0)"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_damaged_network_fails_cleanly(evaluator, tmp_path, case):
    content, message = DAMAGED[case]
    network = tmp_path / "damaged.bin"
    if content is not None:
        network.write_bytes(content)
    c_evaluator.write_matrix(tmp_path / "q.bin", np.zeros((2, 2), np.float32))
    done = c_evaluator.run_c_evaluator(evaluator, "eval", network, tmp_path / "q.bin", tmp_path / "out.bin")
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith(f"nnet_eval: {network}: ")
    assert message in done.stderr
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "out.bin").exists()


def _matrix_bytes(rows, cols, values=None):
    values = np.zeros(rows * cols, np.float32) if values is None else values
    return _u32(rows) + _u32(cols) + np.asarray(values, "<f4").tobytes()


DAMAGED_INPUTS = {
    "wrong width": (_matrix_bytes(2, 58), "input rows have 58 values, expected 59"),
    "cut": (_matrix_bytes(2, 59)[:-4], "truncated in input at byte 8: needs 118 floats, 468 bytes left"),
    "huge rows": (_u32(0xFFFFFFFF) + _u32(59), "truncated in input at byte 8: needs 253403070405 floats"),
    "trailing bytes": (_matrix_bytes(1, 59) + b"\0", "1 trailing bytes after byte 244"),
}


@pytest.mark.parametrize("case", sorted(DAMAGED_INPUTS))
def test_damaged_input_fails_cleanly(evaluator, tmp_path, case):
    content, message = DAMAGED_INPUTS[case]
    (tmp_path / "q.bin").write_bytes(content)
    done = c_evaluator.run_c_evaluator(evaluator, "eval", TOOLKIT_NETWORKS / "stepper.bin", tmp_path / "q.bin",
                                       tmp_path / "out.bin")
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"nnet_eval: {tmp_path / 'q.bin'}: {message}")
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "out.bin").exists()


def test_sanitized_build_reads_every_damaged_file_without_memory_errors(tmp_path):
    """AddressSanitizer and UBSan abort on any out-of-bounds access, overflow or leak-free misuse."""
    if c_evaluator.find_compiler() is None:
        pytest.skip("no C compiler (cc or $CC) on this machine")
    flags = ("-std=c99", "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all")
    try:
        sanitized = c_evaluator.build_c_evaluator(tmp_path, flags=flags, name="nnet_eval_asan")
    except Exception as error:  # a compiler without sanitizer runtimes
        pytest.skip(f"the compiler cannot build with -fsanitize=address,undefined: {error}")
    c_evaluator.write_matrix(tmp_path / "q.bin", np.zeros((2, 2), np.float32))
    for case, (content, message) in DAMAGED.items():
        network = tmp_path / f"{case}.bin"
        if content is not None:
            network.write_bytes(content)
        done = c_evaluator.run_c_evaluator(sanitized, "eval", network, tmp_path / "q.bin", "-")
        assert done.returncode == 2 and message in done.stderr, (case, done.stderr)
    for case, (content, message) in DAMAGED_INPUTS.items():
        (tmp_path / "input.bin").write_bytes(content)
        done = c_evaluator.run_c_evaluator(sanitized, "eval", TOOLKIT_NETWORKS / "stepper.bin",
                                           tmp_path / "input.bin", "-")
        assert done.returncode == 2 and message in done.stderr, (case, done.stderr)
    assert_agrees(sanitized, TOOLKIT_NETWORKS / "stepper.bin", tmp_path, count=20)
