"""What people marked by hand on the shared real frames (``<shared data>/rgbd``), for ``simpact bench
real2sim`` and the tests: the objects of the frames with reference sizes, the object counts of the frames run
unlabelled, a pixel on each labelled object and on each object of some unlabelled frames. It sits above
real2sim in the layers, so the measured code cannot read it (the import contract in the tests enforces it).
"""

from __future__ import annotations

from typing import Any

from simpact.core.frame import FrameError

__all__ = ["EXPECTED_OBJECTS", "LABEL_POINTS", "OBJECT_POINTS", "REAL_FRAMES", "object_pixels"]

#: The real frames under ``<shared data>/rgbd`` and the objects in each that a bench scores: relative path
#: -> {label: key of :data:`real2sim.datasets.YCB_SIZES_M`, or None for an object that is not a YCB object
#: of known size (it is scored against the object points shipped with the frame, see
#: :func:`real2sim.datasets.read_graspnet_object_points`). Other objects in the frame (drill, banana,
#: scissors, ...) have no reference size.
REAL_FRAMES: dict[str, dict[str, str | None]] = {
    # Every object on the PoseCNN frames' chequered table is labelled, as a user would (issue 16); those
    # without a listed size are scored by their fit alone.
    "rgbd/posecnn/000001-color.png": {
        "cracker box": "cracker box",
        "mustard bottle": "mustard bottle",
        "tomato soup can": "tomato soup can",
        "power drill": None,
        "banana": None,
    },
    "rgbd/posecnn/000002-color.png": {
        "sugar box": "sugar box",
        "tomato soup can": "tomato soup can",
        "bleach cleanser": None,
        "coffee can": None,
        "scissors": None,
    },
    "rgbd/posecnn/000003-color.png": {
        "potted meat can": "potted meat can",
        "tomato soup can": "tomato soup can",
        "red bowl": "bowl",
    },
    # Not the YCB cracker box (6 x 15.8 x 21 cm): a smaller Cheez-It box. Standing upright, its own points
    # reach 19.5 cm above the table (19.7 cm at most) and span 4.8 x 14.8 cm; the mustard bottle of the same
    # dataset and camera measures its YCB height (19.2 vs 19 cm), so depth and intrinsics are not the cause.
    "rgbd/6dof_graspnet/cheezit.npy": {"cracker box": None},
    "rgbd/6dof_graspnet/mustard.npy": {"mustard bottle": "mustard bottle"},
    # Not the YCB bowl: its own points reach 8.1 cm above the table, the YCB bowl is 5.5 cm tall.
    "rgbd/6dof_graspnet/green_bowl.npy": {"green bowl": None},
}


#: How many objects stand on the work table in the real frames the bench runs unlabelled, counted by hand from
#: the colour images (issue 16): ground truth for "one region per object", read by the bench only, never by
#: the segmenter. Left out: frames whose count is unclear (PoseCNN 000002's and GraspNet's far clutter, the
#: ClearGrasp 123 pouches) and the labelled frames (their regions are only the labelled objects).
EXPECTED_OBJECTS: dict[str, int] = {
    # A black case, three standing bottles, one lying bottle, a brown wallet.
    "rgbd/cleargrasp/000000080-opaque-rgb-img.jpg": 6,
    "rgbd/cleargrasp/000000080-transparent-rgb-img.jpg": 6,
    # An apple, a mug, a mineral lump, a cyan box, a standing cup, three lying cups.
    "rgbd/cleargrasp/000000130-opaque-rgb-img.jpg": 8,
    "rgbd/cleargrasp/000000130-transparent-rgb-img.jpg": 8,
    # Three bottles lying on a sheet, two of them touching; a fourth object cut by the top-right corner.
    "rgbd/cleargrasp/000000153-opaque-rgb-img.jpg": 4,
    "rgbd/cleargrasp/000000153-transparent-rgb-img.jpg": 4,
    # A mug, a yellow brick, a purple cup, a standing marker, a lying marker.
    "rgbd/uois/image_0007.npy": 5,
    # A wipes tub, a purple cup, a green and an orange mug, a bottle, a toy robot, a red box, two standing
    # markers, a yellow brick (hidden but for its top behind the mugs).
    "rgbd/uois/image_0008.npy": 10,
}

#: One pixel (column, row) on each labelled object of the frames labelled with every object on their table,
#: placed by hand on the colour image: the label's mask must hold its own pixel and no other label's. Read
#: by the bench and the tests only, never by the segmenter.
LABEL_POINTS: dict[str, dict[str, tuple[int, int]]] = {
    "rgbd/posecnn/000001-color.png": {
        "cracker box": (445, 180),
        "mustard bottle": (358, 360),
        "tomato soup can": (432, 320),
        "power drill": (80, 320),
        "banana": (200, 410),
    },
    "rgbd/posecnn/000002-color.png": {
        "bleach cleanser": (255, 190),
        "coffee can": (355, 240),
        "tomato soup can": (440, 305),
        "sugar box": (265, 370),
        "scissors": (160, 352),
    },
    "rgbd/posecnn/000003-color.png": {
        "potted meat can": (220, 250),
        "tomato soup can": (225, 390),
        "red bowl": (430, 330),  # its floor, seen through its opening
    },
}

#: A pixel (column, row) on each object of a few frames, placed by hand on the colour image, or a few
#: pixels of one object where a mask was seen to take part of it and not the rest (a list of pixels): a
#: region holding pixels of two objects is two objects merged, a region holding none is a fragment or not an
#: object. Read by the bench only (:func:`object_pixels`). The frames whose merges issue 16 names, the other
#: two UOIS frames and ClearGrasp 080 and 123.
OBJECT_POINTS: dict[str, list[tuple[int, int] | list[tuple[int, int]]]] = {
    # An apple, the mug, the lump, the cyan box, the standing cup, the three lying cups from far to near.
    "rgbd/cleargrasp/000000130-opaque-rgb-img.jpg": [
        (366, 456),
        (470, 380),
        (590, 180),
        (680, 150),
        (786, 140),
        (840, 240),
        (940, 340),
        (1130, 500),
    ],
    # The black case, the three standing bottles from left to right, the lying bottle, the brown wallet.
    "rgbd/cleargrasp/000000080-opaque-rgb-img.jpg": [
        (270, 260),
        (490, 340),
        (670, 290),
        (960, 320),
        (880, 530),
        (1140, 220),
    ],
    "rgbd/cleargrasp/000000080-transparent-rgb-img.jpg": [
        (270, 260),
        (490, 340),
        (670, 280),
        (940, 310),
        (880, 520),
        (1130, 220),
    ],
    # The mineral lump, the cyan box behind it, the notebook, the right and the left of the two touching
    # pouches, the three flower-shaped dishes (near, far left, far right); the same on both frames.
    **{
        f"rgbd/cleargrasp/000000123-{kind}-rgb-img.jpg": [
            (590, 185),
            (690, 145),
            (400, 480),
            (950, 610),
            (810, 590),
            (600, 392),
            (872, 240),
            (1075, 278),
        ]
        for kind in ("opaque", "transparent")
    },
    # The two touching bottles, the third bottle (the object in the corner is left out: barely seen).
    "rgbd/cleargrasp/000000153-opaque-rgb-img.jpg": [(500, 460), (650, 370), (780, 270)],
    # wipes tub, purple cup, green mug, orange mug, bottle (and its foot, seen over the green mug's rim),
    # toy robot, red box, blue marker, black marker.
    "rgbd/uois/image_0008.npy": [
        (255, 300),
        (145, 270),
        (330, 250),
        (375, 235),
        [(360, 120), (333, 197)],
        (435, 175),
        (505, 170),
        (395, 300),
        (473, 215),
    ],
    # wipes tub, toy robot, snack bag, lying marker, far purple cup, yellow brick, large lidded box, eraser,
    # the small red box under it, mint mug, green marker, near purple cup (the marker in the mug left out).
    "rgbd/uois/image_0006.npy": [
        (150, 120),
        (250, 120),
        (85, 220),
        (160, 215),
        (368, 175),
        (420, 195),
        (510, 240),
        (285, 195),
        (290, 250),
        (345, 310),
        (590, 290),
        (530, 390),
    ],
    # mug, yellow brick, purple cup, lying marker, standing marker.
    "rgbd/uois/image_0007.npy": [(215, 150), (95, 265), (355, 90), (395, 150), (470, 180)],
}


def object_pixels(
    relpath: str, metadata: dict[str, Any] | None = None
) -> list[tuple[tuple[int, int], ...]] | None:
    """Per object hand-marked on the frame at ``relpath``, its pixels (column, row): from
    :data:`OBJECT_POINTS`, else from the frame's own ``metadata["object_points"]`` (a frame bundle's
    ``frame.json``: one ``[column, row]``, or a list of them, per object); None for a frame with none.
    Raises :class:`FrameError` for a malformed ``object_points``."""
    entries: Any = OBJECT_POINTS.get(relpath)
    if entries is None:
        entries = (metadata or {}).get("object_points")
        if entries is None:
            return None
        if not isinstance(entries, list):
            raise FrameError(f"{relpath}: object_points must be a list, one entry per object")
        return [_marked_object(e, relpath) for e in entries]
    return [tuple(e) if isinstance(e, list) else (e,) for e in entries]


def _marked_object(entry: Any, where: str) -> tuple[tuple[int, int], ...]:
    """One object's pixels from ``[column, row]`` or ``[[column, row], ...]``."""
    pixels = entry if isinstance(entry, list) and entry and isinstance(entry[0], list) else [entry]
    out = []
    for px in pixels:
        if not (isinstance(px, list) and len(px) == 2 and all(type(v) is int for v in px)):
            raise FrameError(f"{where}: object_points entry {entry!r} is not [column, row] or a list of them")
        out.append((px[0], px[1]))
    return tuple(out)
