"""Write the PrimeSense examples of Berkeley's gqcnn as frame bundles that ``simpact bench real2sim`` scores.

    python scripts/gqcnn_bundles.py GQCNN_CHECKOUT OUT
    SIMPACT_SHARED_DATA=OUT simpact bench real2sim --seeds 0 topple_box --out DIR

GQCNN_CHECKOUT: a checkout of github.com/BerkeleyAutomation/gqcnn (read at commit 499a609). Its five clutter
piles and ten single objects (``data/examples/{clutter,single_object}/primesense``, 640 x 480, depth in m)
are seen with the camera of ``data/calib/primesense`` (intrinsics, and its pose in the YuMi's base frame,
written as ``T_base_cam``). Each clutter bundle's ``frame.json`` gets the pixels placed by hand on its objects
(:data:`CLUTTER_MARKS`, ``object_points``), each single-object bundle ``expected_objects`` 1. The frames stay
out of this project: their licence (the Regents of the University of California) is for non-commercial
research. Nobody tuned real2sim on them before the twelfth session on issue 16 measured it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image

from simpact.core.frame import Frame, write_frame_bundle

#: Per clutter frame, a pixel (column, row) on each object (two on one object seen in two parts), placed by
#: eye on the colour image away from the outlines (the depth lies a few pixels off the colour there).
CLUTTER_MARKS: dict[int, list[list[int] | list[list[int]]]] = {
    0: [
        [290, 160],  # flashlight
        [360, 180],  # pill bottle
        [300, 235],  # small bottle
        [305, 285],  # shark
        [395, 275],  # clamp
    ],
    1: [
        [269, 171],  # stamp
        [332, 162],  # water bottle
        [375, 196],  # white tube bottle
        [425, 227],  # blue bottle
        [275, 213],  # figure
        [319, 208],  # grey brush
        [305, 229],  # the card under it
        [317, 250],  # white box
        [340, 277],  # spice jar
        [400, 281],  # apple
    ],
    2: [
        [365, 130],  # ball
        [265, 176],  # brown clip
        [327, 207],  # yellow box
        [377, 180],  # white tube
        [377, 226],  # thin box
        [415, 168],  # flashlight
        [431, 226],  # shark
        [250, 261],  # clamp
        [315, 288],  # white card
        [415, 303],  # banana
    ],
    3: [
        [321, 189],  # grey bracket
        [379, 186],  # teal fitting
        [336, 250],  # white part
        [282, 282],  # black part, bottom left
        [414, 257],  # black part, right
        [371, 257],  # black part, middle
    ],
    4: [
        [336, 170],  # loofah
        [432, 257],  # ball
        [[244, 241], [244, 299]],  # octopus in its blister card: two pixels
        [407, 212],  # action figure
        [352, 232],  # action figure
        [365, 262],  # action figure
        [307, 320],  # raccoon tail
    ],
}


def camera(checkout: Path) -> tuple[np.ndarray, np.ndarray]:
    """(K (3, 3) px, T_base_cam (4, 4) m) of gqcnn's PrimeSense calibration."""
    calib = checkout / "data" / "calib" / "primesense"
    intr = json.loads((calib / "primesense.intr").read_text())
    K = np.array([[intr["_fx"], 0.0, intr["_cx"]], [0.0, intr["_fy"], intr["_cy"]], [0.0, 0.0, 1.0]])
    rows = (calib / "primesense.tf").read_text().split("\n")  # from, to, translation, three rotation rows
    R = np.array([r.split() for r in rows[3:6]], dtype=float)
    u, _, vt = np.linalg.svd(R)  # written to six digits: made a rotation again
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = u @ vt, np.array(rows[2].split(), dtype=float)
    return K, T


def write_bundles(checkout: Path, out: Path) -> list[Path]:
    """Every PrimeSense example of ``checkout`` as a bundle under ``out/rgbd``; the bundles written."""
    K, T = camera(checkout)
    written = []
    for kind in ("clutter", "single_object"):
        folder = checkout / "data" / "examples" / kind / "primesense"
        for i in range(len(list(folder.glob("color_*.png")))):
            meta: dict[str, object] = {"source": f"gqcnn {folder.relative_to(checkout)}/color_{i}.png"}
            if kind == "clutter":
                meta["object_points"] = CLUTTER_MARKS[i]
            else:
                meta["expected_objects"] = 1
            frame = Frame(
                rgb=np.asarray(Image.open(folder / f"color_{i}.png").convert("RGB")),
                depth=np.load(folder / f"depth_{i}.npy")[..., 0],
                K=K,
                T_base_cam=T,
                metadata=meta,
            )
            written.append(write_frame_bundle(frame, out / "rgbd" / f"gqcnn_{kind}_{i}"))
    return written


if __name__ == "__main__":
    if len(sys.argv) != 3 or not (Path(sys.argv[1]) / "data" / "calib" / "primesense").is_dir():
        sys.exit(
            "usage: python scripts/gqcnn_bundles.py GQCNN_CHECKOUT OUT (a checkout of gqcnn, with data/)"
        )
    for path in write_bundles(Path(sys.argv[1]), Path(sys.argv[2])):
        print(path)
