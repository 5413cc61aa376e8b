"""``simpact robot capture`` and ``simpact robot calibrate``: the camera's verbs.

``add_camera_parsers(sub)`` adds both to the ``simpact robot`` sub-parsers ``sub`` (called by
:func:`simpact.cli.robot.add_parsers`); the work itself lives in :mod:`robot.camera` and
:mod:`robot.calibration`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from robot.calibration import VIEWS_FILE, collect_with_franka, load_T_base_cam, solve_from_dir
from robot.camera import open_camera
from robot.charuco import CalibrationError, load_board_spec
from robot.handeye import MODES
from simpact.cli.preflight import input_dir, input_file, positive_int, reusable_out, seed
from simpact.core.errors import UsageError
from simpact.core.frame import write_frame_bundle

__all__ = ["add_calibrate_parser", "add_camera_parsers", "add_capture_parser", "cmd_calibrate", "cmd_capture"]


def add_camera_parsers(sub: Any) -> None:
    """Add ``capture`` and ``calibrate`` (in that order) to the ``simpact robot`` sub-parsers ``sub``."""
    add_capture_parser(sub)
    add_calibrate_parser(sub)


# --- capture ------------------------------------------------------------------------------------------------


def add_capture_parser(verbs: Any) -> None:
    """Add ``capture`` to the ``simpact robot`` sub-parsers."""
    p = verbs.add_parser("capture", help="capture one RGB-D frame bundle from a RealSense (or replay one)")
    p.add_argument("--serial", help="RealSense serial number (default: the first connected device)")
    p.add_argument(
        "--from-bundles",
        nargs="+",
        metavar="DIR",
        help="replay recorded bundles instead of a camera (a bundle, or a folder of bundles: the first one)",
    )
    p.add_argument("--extrinsics", help="calibration YAML (simpact robot calibrate) to attach T_base_cam")
    p.add_argument("--warmup", type=int, default=30, help="frames dropped while exposure settles (30)")
    p.add_argument("--no-temporal", action="store_true", help="turn off the temporal depth filter")
    p.add_argument("--hole-filling", action="store_true", help="fill depth holes from neighbours")
    p.add_argument("--out", required=True, help="bundle directory to write")
    p.set_defaults(func=cmd_capture)


def cmd_capture(args: argparse.Namespace) -> None:
    if args.warmup < 0:
        raise UsageError(f"--warmup must be >= 0 frames, got {args.warmup}")
    if args.extrinsics:
        input_file(args.extrinsics, "--extrinsics")
    reusable_out(args.out)
    T = None if args.extrinsics is None else load_T_base_cam(args.extrinsics)
    camera = open_camera(
        args.from_bundles,
        serial=args.serial,
        T_base_cam=T,
        warmup=args.warmup,
        temporal=not args.no_temporal,
        hole_filling=args.hole_filling,
    )
    try:
        frame = camera.capture()
    finally:
        camera.close()
    out = write_frame_bundle(frame, args.out)
    valid = float((frame.depth > 0).mean())
    pose = "with T_base_cam" if frame.T_base_cam is not None else "uncalibrated (no T_base_cam)"
    print(f"captured {frame.width}x{frame.height} frame, {valid:.0%} valid depth, {pose} -> {out}")


# --- calibrate ----------------------------------------------------------------------------------------------


def add_calibrate_parser(verbs: Any) -> None:
    """Add ``calibrate`` to the ``simpact robot`` sub-parsers."""
    p = verbs.add_parser(
        "calibrate",
        help="hand-eye calibration with a ChArUco board: collect views with the robot, or solve recorded",
    )
    p.add_argument(
        "--from-dir",
        metavar="DIR",
        help=f"solve views recorded earlier (DIR/{VIEWS_FILE} + images) instead of collecting; no hardware",
    )
    p.add_argument("--mode", choices=MODES, help="camera set-up (default: the recording's, else eye_to_hand)")
    p.add_argument(
        "--board", help="board YAML with CharucoBoardSpec fields (default: 7x5, 35 mm, DICT_5X5_100)"
    )
    p.add_argument("--host", help="robot address (collection)")
    p.add_argument(
        "--no-realtime", action="store_true", help="connect without a real-time kernel (franky-sim, tests)"
    )
    p.add_argument("--serial", help="RealSense serial number (collection; default: the first device)")
    p.add_argument("--views", type=int, default=15, help="poses to visit when collecting (15)")
    p.add_argument("--seed", type=int, default=0, help="seed of the collection poses around the start pose")
    p.add_argument("--out", help="output directory (default: --from-dir); collection writes its views there")
    p.set_defaults(func=cmd_calibrate)


def cmd_calibrate(args: argparse.Namespace) -> None:
    positive_int(args.views, "--views")
    seed(args.seed)
    if args.board:
        input_file(args.board, "--board")
    if args.from_dir is not None:
        input_dir(args.from_dir, "--from-dir")
    if args.out is not None:
        reusable_out(args.out)
    if args.from_dir is None:
        if args.out is None:
            raise CalibrationError(
                "collecting views needs --out DIR (or solve recorded ones with --from-dir)"
            )
        spec = load_board_spec(args.board)
        if not args.host:
            raise CalibrationError(
                "collecting views needs the robot's --host (or solve recorded ones with --from-dir)"
            )
        collect_with_franka(
            args.host,
            args.out,
            spec,
            realtime=not args.no_realtime,
            serial=args.serial,
            views=args.views,
            seed=args.seed,
            mode=args.mode or "eye_to_hand",
            progress=print,
        )
        source = args.out
    else:
        if args.board is not None:
            raise CalibrationError(f"--board goes with collection; --from-dir reads it from {VIEWS_FILE}")
        source = args.from_dir
    result = solve_from_dir(source, args.out, args.mode)
    out = Path(args.out or source)
    r = result["residuals"]
    print(
        f"calibrated {result['mode']} from {len(result['used_views'])}/{result['views']} views: residuals "
        f"{r['translation_mm']['rms']:.2f} mm, {r['rotation_deg']['rms']:.3f} deg, "
        f"{r['reprojection_px']['rms']:.2f} px rms -> {out / 'result.json'}, {out / result['extrinsics']}"
    )
