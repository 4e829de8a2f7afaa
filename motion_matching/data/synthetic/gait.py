"""Procedural gait on the toolkit's 23-bone skeleton: planted feet, two-bone leg IK, swinging arms.

Feet are planted in world space for the stance part of each stride (so toe contacts come out
like real ones) and swing to the next plant along a lifted arc; the hips ride on the simulation
bone; legs follow by analytic two-bone IK with the knees pointing along the foot; spine, head and
arms use procedural joint angles driven by the gait phase. Axes: y up, characters face +z, +x is
their left. Lengths are metres, angles radians.
"""
import numpy as np

from motion_matching.toolkit import quat, skeleton

THIGH = 0.46
SHIN = 0.46
ANKLE_HEIGHT = 0.08
FOOT_SPACING = 0.1
SOFT_REACH = 0.12
"""Metres short of full extension where the leg IK starts softening the reach."""
OFFSETS = np.array([
    [0.0, 0.0, 0.0], [0.0, 0.93, 0.0],                                      # Simulation, Hips
    [0.09, -0.06, 0.0], [0.0, -THIGH, 0.0], [0.0, -SHIN, 0.0], [0.0, -0.06, 0.12],      # left leg
    [-0.09, -0.06, 0.0], [0.0, -THIGH, 0.0], [0.0, -SHIN, 0.0], [0.0, -0.06, 0.12],     # right leg
    [0.0, 0.10, 0.0], [0.0, 0.12, 0.0], [0.0, 0.12, 0.0], [0.0, 0.16, 0.0], [0.0, 0.10, 0.02],
    [0.04, 0.12, 0.0], [0.14, 0.0, 0.0], [0.0, -0.28, 0.0], [0.0, -0.26, 0.0],          # left arm
    [-0.04, 0.12, 0.0], [-0.14, 0.0, 0.0], [0.0, -0.28, 0.0], [0.0, -0.26, 0.0],        # right arm
])
"""Rest offset of each bone from its parent (skeleton.py order), metres; rest rotations are identity."""

UP = np.array([0.0, 1.0, 0.0])


def _by_speed(speed, points, values):
    return np.interp(speed, points, values)


def animate(rng, path, *, fps=60):
    """Local positions (F, 23, 3) and rotations (F, 23, 4) for a simulation ``path`` (see synthetic)."""
    speed = path["speed"]
    nframes = speed.shape[0]
    style = rng.uniform(0.93, 1.07, 3)
    cadence = _by_speed(speed, [0.0, 1.5, 4.0, 5.0], [0.9, 1.05, 1.5, 1.6]) * style[0]
    phase = rng.uniform(0, 1) + np.cumsum(cadence) / fps
    positions = np.tile(OFFSETS, (nframes, 1, 1))
    rotations = np.zeros((nframes, len(OFFSETS), 4))
    rotations[..., 0] = 1.0
    sim_rotation = quat.from_angle_axis(path["facing"], UP)
    positions[:, skeleton.SIMULATION] = path["position"]
    rotations[:, skeleton.SIMULATION] = sim_rotation
    hips_position, hips_rotation = _hips(speed, phase)
    positions[:, skeleton.HIPS] = hips_position
    rotations[:, skeleton.HIPS] = hips_rotation
    hips_world = quat.mul(sim_rotation, hips_rotation)
    hips_world_position = path["position"] + quat.mul_vec(sim_rotation, hips_position)
    for side, (upleg, leg, foot, toe) in ((1.0, (2, 3, 4, 5)), (-1.0, (6, 7, 8, 9))):
        foot_phase = phase + (0.0 if side > 0 else 0.5)
        ankle, foot_world, toe_bend = _foot_track(path, foot_phase, side=side, fps=fps)
        hip_joint = hips_world_position + quat.mul_vec(hips_world, OFFSETS[upleg])
        upleg_world, leg_world = _leg_ik(hip_joint, ankle, quat.mul_vec(foot_world, [0.0, 0.0, 1.0]))
        rotations[:, upleg] = quat.inv_mul(hips_world, upleg_world)
        rotations[:, leg] = quat.inv_mul(upleg_world, leg_world)
        rotations[:, foot] = quat.inv_mul(leg_world, foot_world)
        rotations[:, toe] = quat.from_angle_axis(toe_bend, [1.0, 0.0, 0.0])
    _upper_body(rotations, speed, phase, style)
    return positions, quat.normalize(rotations)


def _hips(speed, phase):
    """Hips position (F, 3) and rotation (F, 4) relative to the simulation bone."""
    gait = np.clip(speed, 0.0, 1.0)
    cycle = 2 * np.pi * phase
    height = _by_speed(speed, [0.0, 1.5, 4.0], [0.95, 0.93, 0.87])
    bob = _by_speed(speed, [0.0, 1.5, 4.0], [0.0, 0.02, 0.035]) * (0.5 + 0.5 * np.cos(2 * cycle))
    position = np.stack([0.025 * gait * np.sin(cycle), height - bob, 0.012 * speed], axis=-1)
    angles = np.stack([0.1 * gait * np.sin(cycle), 0.03 + 0.03 * speed, 0.04 * gait * np.cos(cycle)], axis=-1)
    return position, quat.from_euler(angles, order="yxz")


def _duty(speed):
    """Fraction of a stride a foot is planted: about 0.6 walking, 0.35 running."""
    return _by_speed(speed, [0.0, 1.5, 2.6, 4.0], [0.65, 0.57, 0.42, 0.36])


def _foot_track(path, foot_phase, *, side, fps):
    """World ankle positions (F, 3), foot rotations (F, 4) and toe bend (F,) of one foot.

    Step k is planted where the neutral stance (feet ``FOOT_SPACING`` either side of the simulation
    bone) is at mid-stance, phase k + duty / 2; between plants the foot swings on an arc.
    """
    speed, frames = path["speed"], np.arange(foot_phase.shape[0], dtype=np.float64)
    first = int(np.floor(foot_phase[0]))
    steps = np.arange(first, int(np.floor(foot_phase[-1])) + 2)
    step_speed = np.interp(np.interp(steps, foot_phase, frames), frames, speed)
    plant_times = np.interp(steps + 0.5 * _duty(step_speed), foot_phase, frames)
    plant_yaw = np.interp(plant_times, frames, path["facing"])
    plant_centre = np.stack([np.interp(plant_times, frames, path["position"][:, axis]) for axis in range(3)], -1)
    side_offset = quat.mul_vec(quat.from_angle_axis(plant_yaw, UP), [side * FOOT_SPACING, 0.0, 0.0])
    plants = plant_centre + side_offset
    step = np.floor(foot_phase).astype(np.int64) - first
    within = foot_phase - np.floor(foot_phase)
    duty = _duty(speed)
    swing = np.clip((within - duty) / (1.0 - duty), 0.0, 1.0)
    blend = swing * swing * (3.0 - 2.0 * swing)
    ankle = plants[step] + blend[:, None] * (plants[step + 1] - plants[step])
    lift = _by_speed(speed, [0.0, 0.3, 1.5, 4.0], [0.0, 0.03, 0.09, 0.18]) + 0.03 * np.clip(
        np.abs(path["turn_rate"]), 0.0, 1.0)
    arc = np.sin(np.pi * swing)
    ankle[:, 1] = ANKLE_HEIGHT + lift * arc
    yaw = plant_yaw[step] + blend * (plant_yaw[step + 1] - plant_yaw[step])
    pitch = 3.0 * lift * np.sin(2 * np.pi * swing)
    foot_world = quat.mul(quat.from_angle_axis(yaw, UP), quat.from_angle_axis(pitch, [1.0, 0.0, 0.0]))
    return ankle, foot_world, -2.0 * lift * arc


def _leg_ik(hip, ankle, forward):
    """World rotations (F, 4) of thigh and shin reaching from ``hip`` towards ``ankle``, knee along ``forward``.

    Both bones share one hinge axis (the normal of the hip-knee-ankle plane), so the knee only bends:
    building each bone's frame from ``forward`` alone twists the shin by half a turn on frames where the
    shin lines up with the foot. The reach is softened near full extension, so the knee straightens
    smoothly instead of snapping (the knee angle's rate grows without bound as the reach nears the
    leg's length).
    """
    reach = ankle - hip
    direction = reach / np.linalg.norm(reach, axis=-1, keepdims=True)
    distance = _soft_reach(np.linalg.norm(reach, axis=-1))
    bend = _perpendicular(forward, direction)
    hinge = np.cross(-direction, bend)
    cos_hip = (THIGH ** 2 + distance ** 2 - SHIN ** 2) / (2 * THIGH * distance)
    sin_hip = np.sqrt(np.clip(1.0 - cos_hip ** 2, 0.0, 1.0))
    knee = hip + THIGH * (cos_hip[:, None] * direction + sin_hip[:, None] * bend)
    end = hip + distance[:, None] * direction
    return _hinged_frame(knee - hip, hinge), _hinged_frame(end - knee, hinge)


def _soft_reach(distance):
    """Hip-to-ankle distances (F,) limited to the leg's length: unchanged up to ``SOFT_REACH`` short of
    it, then approaching it exponentially, with a continuous rate."""
    limit = THIGH + SHIN
    start = limit - SOFT_REACH
    softened = limit - SOFT_REACH * np.exp(-(distance - start) / SOFT_REACH)
    return np.maximum(np.where(distance > start, softened, distance), abs(THIGH - SHIN) + 1e-3)


def _perpendicular(vectors, axis):
    """Unit part of ``vectors`` (F, 3) perpendicular to unit ``axis`` (F, 3)."""
    rest = vectors - np.sum(vectors * axis, axis=-1, keepdims=True) * axis
    return rest / np.linalg.norm(rest, axis=-1, keepdims=True)


def _hinged_frame(bone, hinge):
    """World rotation (F, 4) taking the rest bone direction -y onto ``bone`` and rest +x onto ``hinge``
    (unit, perpendicular to ``bone``)."""
    y = -bone / np.linalg.norm(bone, axis=-1, keepdims=True)
    z = np.cross(hinge, y)
    return quat.from_xform(np.stack([hinge, y, z], axis=-1))


def _upper_body(rotations, speed, phase, style):
    """Fill spine, neck, head and arm rotations (in place) from the gait phase and speed."""
    gait = np.clip(speed, 0.0, 1.0)
    cycle = 2 * np.pi * phase
    zeros = np.zeros_like(speed)
    twist = -0.06 * gait * np.sin(cycle)
    lean = 0.01 * speed
    for bone in (skeleton.BONE_INDEX[name] for name in ("Spine", "Spine1", "Spine2")):
        rotations[:, bone] = quat.from_euler(np.stack([twist, lean, zeros], -1), order="yxz")
    nod = -0.5 * (0.03 + 0.06 * speed) + 0.02 * np.sin(2 * cycle)
    for name in ("Neck", "Head"):
        rotations[:, skeleton.BONE_INDEX[name]] = quat.from_euler(np.stack([zeros, nod, zeros], -1), order="yxz")
    swing = _by_speed(speed, [0.0, 1.5, 4.0], [0.03, 0.35, 0.7]) * style[1] * np.cos(cycle)
    elbow = -(0.15 + 0.3 * speed * style[2])
    for side, prefix in ((1.0, "Left"), (-1.0, "Right")):
        arm = np.stack([zeros, side * swing, zeros + side * 0.12], -1)
        rotations[:, skeleton.BONE_INDEX[prefix + "Arm"]] = quat.from_euler(arm, order="yxz")
        forearm = np.stack([zeros, elbow + 0.3 * side * swing * gait, zeros], -1)
        rotations[:, skeleton.BONE_INDEX[prefix + "ForeArm"]] = quat.from_euler(forearm, order="yxz")
