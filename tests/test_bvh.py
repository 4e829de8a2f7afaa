"""bvh.py: strict parsing with line-numbered errors, and writing that reads back identically."""
import numpy as np
import pytest

from motion_matching.data.bvh import text as bvh
from motion_matching.errors import BvhError, MissingFile
from motion_matching.toolkit import formats

VALID = """\
HIERARCHY
ROOT Hips
{
\tOFFSET 0 0 0
\tCHANNELS 6 Xposition Yposition Zposition Zrotation Yrotation Xrotation
\tJOINT Spine
\t{
\t\tOFFSET 0 10.5 0
\t\tCHANNELS 3 Zrotation Yrotation Xrotation
\t\tEnd Site
\t\t{
\t\t\tOFFSET 0 5 0
\t\t}
\t}
\tJOINT LeftUpLeg
\t{
\t\tOFFSET 9 -1 0
\t\tCHANNELS 3 Zrotation Yrotation Xrotation
\t}
}
MOTION
Frames: 3
Frame Time: 0.033333
1 90 3 4 5 6 7 8 9 10 11 12
1.5 91 3 4 5 6 7 8 9 10 11 12
2 92 3 4 5 6 7 8 9 10 11 -12.25
"""


def write(tmp_path, text, name="clip.bvh"):
    path = tmp_path / name
    path.write_text(text)
    return path


def replace_line(number, new):
    """An edit replacing 1-based line ``number`` of the text with ``new``."""
    def edit(text):
        lines = text.splitlines()
        lines[number - 1] = new
        return "\n".join(lines) + "\n"
    return edit


def delete_line(number):
    def edit(text):
        lines = text.splitlines()
        del lines[number - 1]
        return "\n".join(lines) + "\n"
    return edit


def test_reads_names_parents_offsets_channels_and_motion(tmp_path):
    parsed = bvh.read_bvh(write(tmp_path, VALID))
    assert parsed.names == ["Hips", "Spine", "LeftUpLeg"]
    assert parsed.parents.tolist() == [-1, 0, 0]
    np.testing.assert_array_equal(parsed.offsets, [[0, 0, 0], [0, 10.5, 0], [9, -1, 0]])
    assert parsed.channels[0] == bvh.POSITION_CHANNELS + ("Zrotation", "Yrotation", "Xrotation")
    assert parsed.channels[2] == ("Zrotation", "Yrotation", "Xrotation")
    assert parsed.frame_time == 0.033333
    assert parsed.motion.shape == (3, 12) and parsed.motion.dtype == np.float64
    assert parsed.motion[2, -1] == -12.25 and parsed.motion[1, 0] == 1.5
    assert parsed.channel_columns(2) == slice(9, 12)
    np.testing.assert_array_equal(parsed.end_sites[1], [0, 5, 0])
    assert parsed.lines["joints"] == [2, 6, 15] and parsed.lines["frames"] == [24, 25, 26]


def test_write_then_read_gives_the_same_file_contents(tmp_path):
    parsed = bvh.read_bvh(write(tmp_path, VALID))
    parsed.motion = parsed.motion + np.random.default_rng(0).uniform(-1, 1, parsed.motion.shape)
    bvh.write_bvh(tmp_path / "out.bvh", parsed)
    again = bvh.read_bvh(tmp_path / "out.bvh")
    assert again.names == parsed.names and again.channels == parsed.channels
    assert again.parents.tolist() == parsed.parents.tolist()
    np.testing.assert_array_equal(again.offsets, parsed.offsets)
    np.testing.assert_allclose(again.motion, parsed.motion, atol=5e-7)
    assert again.frame_time == parsed.frame_time and again.end_sites.keys() == parsed.end_sites.keys()


def test_writer_refuses_joints_out_of_depth_first_order(tmp_path):
    parsed = bvh.read_bvh(write(tmp_path, VALID))
    parsed.parents = np.array([-1, 2, 0])
    with pytest.raises(ValueError, match="depth-first"):
        bvh.write_bvh(tmp_path / "out.bvh", parsed)
    assert not (tmp_path / "out.bvh").exists()


BAD_FILES = {
    "channel count": (replace_line(9, "CHANNELS 3 Zrotation Yrotation"),
                      "line 9: joint 'Spine' declares 3 channels but lists 2"),
    "unknown channel": (replace_line(18, "CHANNELS 3 Zrotation Wrotation Xrotation"),
                        "line 18: joint 'LeftUpLeg' has unknown channel 'Wrotation'"),
    "repeated channel": (replace_line(18, "CHANNELS 3 Zrotation Zrotation Xrotation"),
                         "line 18: joint 'LeftUpLeg' lists a channel twice"),
    "non-numeric offset": (replace_line(8, "OFFSET 0 ten 0"),
                           "line 8: 'ten' is not a number (OFFSET of joint 'Spine')"),
    "missing offset": (delete_line(17), "line 17: expected 'OFFSET' (joint 'LeftUpLeg'), found 'CHANNELS'"),
    "duplicate joint": (replace_line(15, "JOINT Spine"), "line 15: 'Spine' is not a valid or unique joint name"),
    "unexpected word": (replace_line(19, "JOINTS"),
                        "line 19: unexpected 'JOINTS' in joint 'LeftUpLeg': expected JOINT, End Site or '}'"),
    "missing brace": (delete_line(20), "line 20: hierarchy ends where JOINT, End Site or '}' in joint 'Hips' "
                                       "was expected"),
    "second root": (replace_line(20, "} ROOT Other"),
                    "line 20: unexpected 'ROOT' after the root joint's closing brace "
                    "(one ROOT per file, then MOTION)"),
    "no hierarchy": (replace_line(1, "HIERARCHIES"),
                     "line 1: expected 'HIERARCHY' (first word of a BVH file), found 'HIERARCHIES'"),
    "no motion": (replace_line(21, "MOTIONS"), "line 26: the file has no MOTION line"),
    "non-numeric frame count": (replace_line(22, "Frames: three"), "line 22: 'three' is not a number (Frames:)"),
    "fractional frame count": (replace_line(22, "Frames: 2.5"), "line 22: frame count 2.5 is not a whole number"),
    "bad frame time line": (replace_line(23, "FrameTime: 0.03"),
                            "line 23: expected 'Frame Time: <value>', found 'FrameTime: 0.03'"),
    "zero frame time": (replace_line(23, "Frame Time: 0"), "line 23: frame time 0.0 must be positive"),
    "truncated motion": (delete_line(26), "line 25: motion block is truncated: 'Frames: 3' "
                                          "but the file ends after 2 frames"),
    "extra frame": (lambda text: text + "1 2 3 4 5 6 7 8 9 10 11 12\n",
                    "line 27: more frame lines than 'Frames: 3' announces"),
    "short frame": (replace_line(25, "1 2 3 4 5 6 7 8 9 10 11"),
                    "line 25: frame 1 has 11 values, the hierarchy declares 12 channels"),
    "non-numeric value": (replace_line(25, "1 2 3 4 5 6 7 8 9 1O 11 12"),
                          "line 25: '1O' is not a number (frame 1)"),
    "nan value": (replace_line(26, "1 2 3 4 5 6 7 nan 9 10 11 12"),
                  "line 26: 'nan' is not a finite number (frame 2)"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_file_names_file_and_line(tmp_path, case):
    edit, problem = BAD_FILES[case]
    path = write(tmp_path, edit(VALID))
    with pytest.raises(BvhError) as caught:
        bvh.read_bvh(path)
    assert str(caught.value) == f"{path}: {problem}"


def test_non_utf8_bytes_name_their_line(tmp_path):
    path = tmp_path / "clip.bvh"
    path.write_bytes(VALID.encode().replace(b"LeftUpLeg", b"Left\xffUpLeg", 1))
    with pytest.raises(BvhError, match=r"clip.bvh: line 15: not UTF-8 text$"):
        bvh.read_bvh(path)


def test_missing_file_is_a_missing_file_error(tmp_path):
    with pytest.raises(MissingFile) as caught:
        bvh.read_bvh(tmp_path / "absent.bvh")
    assert str(caught.value) == f"{tmp_path / 'absent.bvh'}: no such file"


@pytest.mark.parametrize("write, problem", [
    (lambda path: path.write_bytes(b""), "is an empty file, not a BVH text file"),
    (lambda path: formats.save_latent(path, np.zeros((3, 2), np.float32)),
     "is a latent.bin (3 frames x 2 columns), not a BVH text file"),
    (lambda path: path.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(200)),
     "is an HDF5 file (a projector cache, for example), not a BVH text file"),
    (lambda path: path.write_bytes(bytes(range(256)) * 4), "is a binary file, not a BVH text file"),
])
def test_a_binary_file_says_what_it_is(tmp_path, write, problem):
    path = tmp_path / "clip.bvh"
    write(path)
    with pytest.raises(BvhError) as caught:
        bvh.read_bvh(path)
    assert str(caught.value) == f"{path}: {problem}"
