"""The toolkit's 23-bone skeleton: bone order, parents, mirror pairs and the bones features use."""

BONE_NAMES = (
    "Simulation", "Hips",
    "LeftUpLeg", "LeftLeg", "LeftFoot", "LeftToe",
    "RightUpLeg", "RightLeg", "RightFoot", "RightToe",
    "Spine", "Spine1", "Spine2", "Neck", "Head",
    "LeftShoulder", "LeftArm", "LeftForeArm", "LeftHand",
    "RightShoulder", "RightArm", "RightForeArm", "RightHand",
)
BONE_PARENTS = (-1, 0, 1, 2, 3, 4, 1, 6, 7, 8, 1, 10, 11, 12, 13, 12, 15, 16, 17, 12, 19, 20, 21)
BONE_INDEX = {name: index for index, name in enumerate(BONE_NAMES)}

SIMULATION = BONE_INDEX["Simulation"]
HIPS = BONE_INDEX["Hips"]
LEFT_FOOT = BONE_INDEX["LeftFoot"]
LEFT_TOE = BONE_INDEX["LeftToe"]
RIGHT_FOOT = BONE_INDEX["RightFoot"]
RIGHT_TOE = BONE_INDEX["RightToe"]
SPINE2 = BONE_INDEX["Spine2"]
CONTACT_BONES = (LEFT_TOE, RIGHT_TOE)


def mirror_index(index):
    """Index of the bone mirroring ``index`` across the body's left/right plane (itself if central)."""
    name = BONE_NAMES[index]
    for side, other in (("Left", "Right"), ("Right", "Left")):
        if name.startswith(side):
            return BONE_INDEX[other + name[len(side):]]
    return index


MIRROR_INDICES = tuple(mirror_index(index) for index in range(len(BONE_NAMES)))
