"""Strict BVH text files: ``read_bvh`` parses one into a ``Bvh``, ``write_bvh`` writes one back.

The reader checks the whole grammar (HIERARCHY, one ROOT, JOINT / End Site blocks with OFFSET and
CHANNELS, then MOTION, ``Frames:``, ``Frame Time:`` and exactly that many frame lines of the declared
channel count, every value a finite number). Any problem raises ``errors.BvhError(path,
"line N: <problem>")`` naming the file and the 1-based line.
"""
import dataclasses
import os

import numpy as np

from motion_matching.atomic import atomic_write
from motion_matching.errors import BvhError
from motion_matching.toolkit.binary_io import open_for_reading
from motion_matching.toolkit.sniff import TEXT_SNIFF_BYTES, file_kind

POSITION_CHANNELS = ("Xposition", "Yposition", "Zposition")
ROTATION_CHANNELS = ("Xrotation", "Yrotation", "Zrotation")
CHANNEL_NAMES = POSITION_CHANNELS + ROTATION_CHANNELS
BVH_KIND = "a BVH text file"  # as errors name it: "x.bin: is a features.bin (...), not a BVH text file"


@dataclasses.dataclass
class Bvh:
    """A parsed BVH file; joints are in file (depth-first) order, so parents come before children."""

    names: list                # J joint names
    parents: np.ndarray        # (J,) int64, -1 for the root
    offsets: np.ndarray        # (J, 3) float64, file units (LaFAN1: centimetres)
    channels: list             # J tuples of channel names, e.g. ("Zrotation", "Yrotation", "Xrotation")
    frame_time: float          # seconds per frame
    motion: np.ndarray         # (F, C) float64, C = total channel count, joints in file order
    end_sites: dict = dataclasses.field(default_factory=dict)  # joint index -> (3,) End Site offset
    lines: dict = dataclasses.field(default_factory=dict)
    # where the reader found things (1-based): "joints" and "channels" (lists of J lines),
    # "hierarchy_end", "frame_time" and "frames" (list of F lines); empty for built objects

    @property
    def nframes(self):
        return self.motion.shape[0]

    def channel_columns(self, joint):
        """Columns of ``motion`` that hold ``joint``'s channels; returns a slice."""
        start = sum(len(channels) for channels in self.channels[:joint])
        return slice(start, start + len(self.channels[joint]))


class _Tokens:
    """The hierarchy's whitespace-separated words with their line numbers, read front to back."""

    def __init__(self, path, items, end_line):
        self.path, self.items, self.end_line, self.position = path, items, end_line, 0

    def error(self, line, problem):
        return BvhError(self.path, f"line {line}: {problem}")

    def peek_line(self):
        return self.items[self.position][1] if self.position < len(self.items) else self.end_line

    def next(self, expected):
        if self.position >= len(self.items):
            raise self.error(self.end_line, f"hierarchy ends where {expected} was expected")
        self.position += 1
        return self.items[self.position - 1]

    def expect(self, word, context):
        token, line = self.next(f"'{word}' ({context})")
        if token != word:
            raise self.error(line, f"expected '{word}' ({context}), found '{token}'")
        return line

    def rest_of_line(self, line):
        """The remaining words on ``line``; returns a list of strings."""
        words = []
        while self.position < len(self.items) and self.items[self.position][1] == line:
            words.append(self.items[self.position][0])
            self.position += 1
        return words

    def numbers(self, count, context):
        """Read ``count`` finite numbers; returns a (count,) float64 array."""
        values = []
        for _ in range(count):
            token, line = self.next(f"a number ({context})")
            values.append(_number(self.path, line, token, context))
        return np.array(values)


def _number(path, line, token, context):
    try:
        value = float(token)
    except ValueError:
        raise BvhError(path, f"line {line}: '{token}' is not a number ({context})") from None
    if not np.isfinite(value):
        raise BvhError(path, f"line {line}: '{token}' is not a finite number ({context})")
    return value


def read_bvh(path):
    """Parse the BVH file at ``path``; returns a ``Bvh`` (motion (F, C) float64, offsets (J, 3))."""
    path = os.fspath(path)
    with open_for_reading(path) as stream:
        raw = stream.read()
    if not raw:
        raise BvhError(path, f"is an empty file, not {BVH_KIND}")
    if b"\0" in raw[:TEXT_SNIFF_BYTES]:  # text never holds NUL bytes: this is some binary file
        raise BvhError(path, f"is {file_kind(path) or 'a binary file'}, not {BVH_KIND}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw[:error.start].count(b"\n") + 1
        raise BvhError(path, f"line {line}: not UTF-8 text") from None
    return parse_bvh(text, path=path)


def parse_bvh(text, *, path="<text>"):
    """Parse BVH ``text``; ``path`` labels errors. Returns a ``Bvh``."""
    lines = text.splitlines()
    motion_at = next((index for index, line in enumerate(lines) if line.split()[:1] == ["MOTION"]), None)
    if motion_at is None:
        raise BvhError(path, f"line {len(lines)}: the file has no MOTION line")
    items = [(word, number + 1) for number, line in enumerate(lines[:motion_at]) for word in line.split()]
    tokens = _Tokens(path, items, motion_at + 1)
    bvh = _parse_hierarchy(tokens)
    _parse_motion(path, lines, motion_at, bvh)
    return bvh


def _parse_hierarchy(tokens):
    tokens.expect("HIERARCHY", "first word of a BVH file")
    tokens.expect("ROOT", "the hierarchy starts with its root joint")
    bvh = Bvh(names=[], parents=[], offsets=[], channels=[], frame_time=0.0, motion=None,
              lines={"joints": [], "channels": []})
    _parse_joint(tokens, bvh, parent=-1)
    bvh.lines["hierarchy_end"] = tokens.items[tokens.position - 1][1]
    if tokens.position < len(tokens.items):
        token, line = tokens.items[tokens.position]
        raise tokens.error(line, f"unexpected '{token}' after the root joint's closing brace "
                                 "(one ROOT per file, then MOTION)")
    bvh.parents = np.array(bvh.parents, dtype=np.int64)
    bvh.offsets = np.array(bvh.offsets, dtype=np.float64).reshape(-1, 3)
    return bvh


def _parse_joint(tokens, bvh, *, parent):
    name, line = tokens.next("a joint name")
    if name in ("{", "}") or name in bvh.names:
        raise tokens.error(line, f"'{name}' is not a valid or unique joint name")
    joint = len(bvh.names)
    bvh.names.append(name)
    bvh.parents.append(parent)
    bvh.lines["joints"].append(line)
    tokens.expect("{", f"opening joint '{name}'")
    tokens.expect("OFFSET", f"joint '{name}'")
    bvh.offsets.append(tokens.numbers(3, f"OFFSET of joint '{name}'"))
    bvh.channels.append(_parse_channels(tokens, name))
    bvh.lines["channels"].append(tokens.items[tokens.position - 1][1])
    while True:
        token, line = tokens.next(f"JOINT, End Site or '}}' in joint '{name}'")
        if token == "}":
            return
        if token == "JOINT":
            _parse_joint(tokens, bvh, parent=joint)
        elif token == "End":
            tokens.expect("Site", f"'End Site' in joint '{name}'")
            tokens.expect("{", f"opening the End Site of joint '{name}'")
            tokens.expect("OFFSET", f"End Site of joint '{name}'")
            bvh.end_sites[joint] = tokens.numbers(3, f"End Site OFFSET of joint '{name}'")
            tokens.expect("}", f"closing the End Site of joint '{name}'")
        else:
            raise tokens.error(line, f"unexpected '{token}' in joint '{name}': expected JOINT, End Site or '}}'")


def _parse_channels(tokens, name):
    line = tokens.expect("CHANNELS", f"joint '{name}' declares its channels after OFFSET")
    words = tokens.rest_of_line(line)
    if not words or not (words[0].isascii() and words[0].isdigit()):
        raise tokens.error(line, f"CHANNELS of joint '{name}' must start with a channel count")
    count, names = int(words[0]), tuple(words[1:])
    if count != len(names):
        raise tokens.error(line, f"joint '{name}' declares {count} channels but lists {len(names)}")
    for channel in names:
        if channel not in CHANNEL_NAMES:
            raise tokens.error(line, f"joint '{name}' has unknown channel '{channel}'")
    if len(set(names)) != len(names):
        raise tokens.error(line, f"joint '{name}' lists a channel twice")
    return names


def _parse_motion(path, lines, motion_at, bvh):
    rows = [(number, line) for number, line in enumerate(lines[motion_at + 1:], motion_at + 2) if line.strip()]
    last_line = len(lines)
    header = [("Frames:",), ("Frame", "Time:")]
    values = []
    for index, words in enumerate(header):
        if len(rows) <= index:
            raise BvhError(path, f"line {last_line}: the file ends before '{' '.join(words)}'")
        number, found = rows[index][0], rows[index][1].split()
        if tuple(found[:len(words)]) != words or len(found) != len(words) + 1:
            raise BvhError(path, f"line {number}: expected '{' '.join(words)} <value>', found '{' '.join(found)}'")
        values.append(_number(path, number, found[-1], " ".join(words)))
    nframes, frame_time = values
    if nframes < 0 or nframes != int(nframes):
        raise BvhError(path, f"line {rows[0][0]}: frame count {rows[0][1].split()[-1]} is not a whole number")
    if frame_time <= 0:
        raise BvhError(path, f"line {rows[1][0]}: frame time {frame_time} must be positive")
    bvh.frame_time = frame_time
    bvh.lines["frame_time"] = rows[1][0]
    nchannels = sum(len(channels) for channels in bvh.channels)
    bvh.motion = _parse_frames(path, rows[2:], (int(nframes), nchannels), last_line=last_line)
    bvh.lines["frames"] = [number for number, _ in rows[2:]]


def _parse_frames(path, rows, shape, *, last_line):
    """Motion values ``shape`` = (frames, channels) float64 from ``rows`` [(line number, text)].

    numpy's C text parser reads well-formed blocks; anything it refuses or misreads is parsed again
    line by line to name the first bad line.
    """
    motion = None
    if rows and shape[1] > 0:
        try:
            motion = np.loadtxt([text for _, text in rows], dtype=np.float64, comments=None, ndmin=2)
        except ValueError:
            motion = None
    if motion is not None and motion.shape == shape and np.isfinite(motion).all():
        return motion
    return _parse_frames_checked(path, rows, shape, last_line=last_line)


def _parse_frames_checked(path, rows, shape, *, last_line):
    nframes, nchannels = shape
    if len(rows) < nframes:
        raise BvhError(path, f"line {last_line}: motion block is truncated: 'Frames: {nframes}' "
                             f"but the file ends after {len(rows)} frames")
    if len(rows) > nframes:
        raise BvhError(path, f"line {rows[nframes][0]}: more frame lines than 'Frames: {nframes}' announces")
    motion = np.empty(shape)
    for frame, (number, text) in enumerate(rows):
        words = text.split()
        if len(words) != nchannels:
            raise BvhError(path, f"line {number}: frame {frame} has {len(words)} values, "
                                 f"the hierarchy declares {nchannels} channels")
        motion[frame] = [_number(path, number, word, f"frame {frame}") for word in words]
    return motion


def write_bvh(path, bvh, *, decimals=6):
    """Write ``bvh`` to ``path`` atomically as BVH text, values with ``decimals`` decimal places."""
    children = [[] for _ in bvh.names]
    for joint, parent in enumerate(bvh.parents):
        if parent >= joint or (parent < 0 and joint != 0):
            raise ValueError(f"joint {joint} ('{bvh.names[joint]}') has parent {parent}: "
                             "joints must be in depth-first order with the root first")
        if parent >= 0:
            children[parent].append(joint)
    text = ["HIERARCHY"]
    order = []
    _write_joint(text, bvh, children, order, joint=0, depth=0, decimals=decimals)
    if order != list(range(len(bvh.names))):
        raise ValueError("joints are not in depth-first order: the motion columns would not match")
    text += ["MOTION", f"Frames: {bvh.nframes}", f"Frame Time: {bvh.frame_time:.{max(decimals, 6)}f}"]
    row_format = " ".join([f"%.{decimals}f"] * bvh.motion.shape[1])
    text += [row_format % tuple(row) for row in bvh.motion.tolist()]
    with atomic_write(path, "w") as stream:
        stream.write("\n".join(text) + "\n")


def _write_joint(text, bvh, children, order, *, joint, depth, decimals):
    indent, inner = "\t" * depth, "\t" * (depth + 1)
    order.append(joint)
    keyword = "ROOT" if bvh.parents[joint] < 0 else "JOINT"
    channels = bvh.channels[joint]

    def offset(values):
        return "OFFSET " + " ".join(f"{value:.{decimals}f}" for value in values)

    text += [f"{indent}{keyword} {bvh.names[joint]}", f"{indent}{{", inner + offset(bvh.offsets[joint]),
             f"{inner}CHANNELS {len(channels)} {' '.join(channels)}".rstrip()]
    for child in children[joint]:
        _write_joint(text, bvh, children, order, joint=child, depth=depth + 1, decimals=decimals)
    if joint in bvh.end_sites:
        text += [f"{inner}End Site", f"{inner}{{", f"{inner}\t" + offset(bvh.end_sites[joint]), f"{inner}}}"]
    text.append(f"{indent}}}")
