"""A fuzzed command line: every subcommand of ``simpact`` with bad input exits 2 with one line on stderr, no
traceback, and leaves an earlier output folder as it was. No case may start a rollout (the corpus runs in
seconds).

Cases are ``(argv, fragment)``: ``fragment`` must appear in the error line. Paths in ``argv`` are names in
the corpus folder (see :func:`corpus_dir`): ``plan.json`` (valid), ``truncated.json``, ``binary.json`` (not
UTF-8), ``empty.json``, ``list.json`` (JSON, not a plan), ``adir/`` (an empty folder), ``afile`` (a file),
``earlier/`` (an earlier run's output folder), ``bigcam.yaml`` (a 100000-pixel camera), ``nancam.yaml``,
``tiny.xml`` (an MJCF scene), ``rec/`` (a recording made from it) and ``rec_truncated/`` (the same with a
truncated chunk).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from simpact.cli import build_parser, main

T = "non_toppling_push"
EARLIER = "earlier"
PLAN = {"actions": [{"type": "LIFT", "dz": 0.02}]}
TINY_MJCF = """<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1"/>
    <body name="box" pos="0 0 0.1"><freejoint/><geom type="box" size="0.02 0.02 0.02" mass="0.1"/></body>
  </worldbody>
  <keyframe><key qpos="0 0 0.1 1 0 0 0"/></keyframe>
</mujoco>
"""


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    (root / "plan.json").write_text(json.dumps(PLAN))
    (root / "truncated.json").write_text(json.dumps(PLAN)[:17])
    (root / "binary.json").write_bytes(b"\xff\xfe\x00\x81binary\x00")
    (root / "empty.json").write_text("")
    (root / "list.json").write_text("[1, 2, 3]")
    (root / "adir").mkdir()
    (root / "afile").write_text("an earlier file\n")
    earlier = root / EARLIER
    earlier.mkdir()
    (earlier / "result.json").write_text('{"status": "done", "earlier": true}\n')
    (earlier / "notes.txt").write_text("kept\n")
    K = "K: [[300, 0, 150], [0, 300, 120], [0, 0, 1]]"
    (root / "bigcam.yaml").write_text(f"width: 100000\nheight: 100000\n{K}\n")
    (root / "nancam.yaml").write_text(
        "width: 320\nheight: 240\nK: [[.nan, 0, 150], [0, 300, 120], [0, 0, 1]]\n"
    )
    (root / "tiny.xml").write_text(TINY_MJCF)
    np.save(root / "whole.npy", np.zeros((4, 4, 6)))
    (root / "truncated.npy").write_bytes((root / "whole.npy").read_bytes()[:100])
    cwd = os.getcwd()
    os.chdir(root)
    try:
        main(["audit", "record", "--mjcf", "tiny.xml", "--steps", "40", "--out", "rec"])
    finally:
        os.chdir(cwd)
    if (root / "rec").is_dir():
        shutil.copytree(root / "rec", root / "rec_truncated")
        chunks = sorted(p for p in (root / "rec_truncated").rglob("*") if p.is_file() and "chunk" in p.name)
        for chunk in chunks[:1]:
            data = chunk.read_bytes()
            chunk.write_bytes(data[: len(data) // 3])
    return root


# (argv, fragment of the one error line). ``--out earlier`` checks that a refused command leaves it alone.
CASES: list[tuple[list[str], str]] = [
    # the top level
    (["no_such_verb"], "invalid choice"),
    (["tasks", "extra"], "unrecognized arguments"),
    # rollout
    (["rollout", T, "--plan", "adir", "--out", "o"], "is a folder"),
    (["rollout", T, "--plan", "missing.json", "--out", "o"], "no such file"),
    (["rollout", T, "--plan", "truncated.json", "--out", "o"], "not valid JSON"),
    (["rollout", T, "--plan", "binary.json", "--out", "o"], "binary.json"),
    (["rollout", T, "--plan", "empty.json", "--out", "o"], "empty.json"),
    (["rollout", T, "--plan", "list.json", "--out", "o"], "list.json"),
    (["rollout", T, "--plan", "reference", "--seed", "-1", "--out", "o"], "--seed"),
    (["rollout", T, "--plan", "reference", "--seed", "abc", "--out", "o"], "invalid int value"),
    (["rollout", T, "--plan", "reference", "--seed", "nan", "--out", "o"], "invalid int value"),
    (["rollout", T, "--plan", "reference", "--out", "afile"], "is a file"),
    (["rollout", T, "--plan", "reference", "--out", EARLIER], "holds an earlier run"),
    (["rollout", "no_such_task", "--plan", "reference", "--out", "o"], "unknown task"),
    (["rollout", "adir", "--plan", "reference", "--out", "o"], "adir"),
    (["rollout", T, "--out", "o"], "--plan"),
    # render
    (["render", T, "--camera", "bigcam.yaml", "--out", "o"], "larger than 8192 px"),
    (["render", T, "--camera", "nancam.yaml", "--out", "o"], "NaN"),
    (["render", T, "--camera", "adir", "--out", "o"], "is a folder"),
    (["render", T, "--camera", "missing.yaml", "--out", "o"], "no such file"),
    (["render", T, "--camera", "binary.json", "--out", "o"], "binary.json"),
    (["render", T, "--camera", "list.json", "--out", "o"], "mapping"),
    (["render", T, "--seed", "-5", "--out", "o"], "--seed"),
    (["render", T, "--out", "afile"], "is a file"),
    (["render", T, "--out", EARLIER], "holds an earlier run"),
    # plan (owned elsewhere; kept here so that its pre-flight is fuzzed too)
    (["plan", "no_such_task", "--out", "o"], "unknown task"),
    (["plan", T, "--seed", "-1", "--out", "o"], "seed"),
    (["plan", T, "--k", "0", "--out", "o"], "k"),
    (["plan", T, "--k", "many", "--out", "o"], "invalid int value"),
    (["plan", T, "--out", "afile"], "afile"),
    (["plan", T, "--out", EARLIER], "earlier run"),
    (["plan", T, "--frame", "adir", "--out", "o"], "adir"),
    (["plan", T, "--vlm", "replay", "--replay", "missing.jsonl", "--out", "o"], "missing.jsonl"),
    (["plan", T, "--vlm", "replay", "--replay", "adir", "--out", "o"], "adir"),
    # audit (owned elsewhere)
    (["audit", "record", "--mjcf", "missing.xml", "--out", "o"], "missing.xml"),
    (["audit", "record", "--mjcf", "truncated.json", "--out", "o"], "truncated.json"),
    (["audit", "record", "--mjcf", "tiny.xml", "--steps", "-3", "--out", "o"], "steps"),
    (["audit", "record", "--task", T, "--seed", "-1", "--out", "o"], "seed"),
    (["audit", "record", "--task", T, "--plan", "adir", "--out", "o"], "adir"),
    (["audit", "record", "--mjcf", "tiny.xml", "--out", "afile"], "afile"),
    (["audit", "record", "--mjcf", "tiny.xml", "--out", "rec"], "rec"),
    (["audit", "detect", "adir", "--out", "o"], "adir"),
    (["audit", "detect", "afile", "--out", "o"], "afile"),
    (["audit", "detect", "rec_truncated", "--out", "o"], "rec_truncated"),
    (["audit", "detect", "rec", "--out", "afile"], "afile"),
    (["audit", "replay", "missing_rec"], "missing_rec"),
    (["audit", "replay", "rec_truncated"], "rec_truncated"),
    (["audit", "rerun", "rec", "--set", "bogus=1", "--out", "o"], "bogus"),
    (["audit", "rerun", "rec", "--set", "mass=-5", "--out", "o"], "mass"),
    (["audit", "rerun", "rec", "--set", "mass=nan", "--out", "o"], "mass"),
    (["audit", "score", "adir"], "adir"),
    (["audit", "settle", "--scene", "binary.json", "--out", "o"], "binary.json"),
    (["audit", "settle", "--scene", "truncated.json", "--out", "o"], "truncated.json"),
    (["audit", "settle", "--task", T, "--seconds", "nan", "--out", "o"], "seconds"),
    (["audit", "settle", "--task", T, "--seconds", "-1", "--out", "o"], "seconds"),
    (["audit", "settle", "--task", T, "--seed", "-1", "--out", "o"], "seed"),
    # real2sim
    (["real2sim", "adir", "--out", "o"], "adir"),
    (["real2sim", "afile", "--out", "o"], "unknown frame format"),
    (["real2sim", "missing", "--out", "o"], "missing"),
    (["real2sim", "truncated.npy", "--out", "o"], "truncated.npy"),
    (["real2sim", "adir", "--spacing", "nan", "--out", "o"], "--spacing"),
    (["real2sim", "adir", "--spacing", "-0.01", "--out", "o"], "--spacing"),
    (["real2sim", "adir", "--settle-s", "inf", "--out", "o"], "--settle-s"),
    (["real2sim", "adir", "--settle-s", "nan", "--out", "o"], "--settle-s"),
    (["real2sim", "adir", "--kind", "dough=jelly", "--out", "o"], "--kind"),
    (["real2sim", "adir", "--task", "no_such_task", "--out", "o"], "unknown task"),
    # robot
    (["robot", "execute", "--host", "h", "--plan", "plan.json", "--out", "o"], "--table-only"),
    (["robot", "execute", "--host", "h", "--plan", "adir", "--table-only", "--out", "o"], "is a folder"),
    (["robot", "execute", "--host", "h", "--plan", "missing.json", "--task", T, "--out", "o"], "no such"),
    (["robot", "execute", "--host", "h", "--plan", "plan.json", "--table-only", "--out", "afile"], "file"),
    (
        ["robot", "execute", "--host", "h", "--plan", "plan.json", "--task", T, "--seed", "-1", "--out", "o"],
        "--seed",
    ),
    (
        [
            "robot",
            "execute",
            "--host",
            "h",
            "--plan",
            "plan.json",
            "--table-only",
            "--speed",
            "nan",
            "--out",
            "o",
        ],
        "--speed",
    ),
    (
        [
            "robot",
            "execute",
            "--host",
            "h",
            "--plan",
            "plan.json",
            "--table-only",
            "--speed",
            "inf",
            "--out",
            "o",
        ],
        "--speed",
    ),
    (
        [
            "robot",
            "execute",
            "--host",
            "h",
            "--plan",
            "plan.json",
            "--table-only",
            "--speed",
            "-1",
            "--out",
            "o",
        ],
        "--speed",
    ),
    (
        [
            "robot",
            "execute",
            "--host",
            "h",
            "--plan",
            "plan.json",
            "--table-only",
            "--resume-from",
            "-2",
            "--out",
            "o",
        ],
        "--resume-from",
    ),
    (
        ["robot", "execute", "--host", "h", "--plan", "plan.json", "--scene", "missing", "--out", "o"],
        "missing",
    ),
    (
        [
            "robot",
            "execute",
            "--host",
            "h",
            "--plan",
            "plan.json",
            "--table-only",
            "--limits",
            "adir",
            "--out",
            "o",
        ],
        "--limits",
    ),
    (
        ["robot", "execute", "--host", "h", "--plan", "plan.json", "--task", T, "--table-only", "--out", "o"],
        "not allowed",
    ),
    (["robot", "capture", "--from-bundles", "adir", "--out", "o"], "adir"),
    (["robot", "capture", "--from-bundles", "adir", "--warmup", "-1", "--out", "o"], "--warmup"),
    (["robot", "capture", "--from-bundles", "adir", "--extrinsics", "missing.yaml", "--out", "o"], "missing"),
    (["robot", "capture", "--from-bundles", "adir", "--out", "afile"], "is a file"),
    (["robot", "calibrate", "--from-dir", "afile"], "is a file"),
    (["robot", "calibrate", "--from-dir", "missing"], "no such folder"),
    (["robot", "calibrate", "--from-dir", "adir"], "adir"),
    (["robot", "calibrate", "--from-dir", "adir", "--views", "0"], "--views"),
    (["robot", "calibrate", "--host", "h", "--out", "o", "--seed", "-1"], "--seed"),
    (["robot", "run", T, "--sim", "--seed", "-1", "--out", "o"], "--seed"),
    (["robot", "run", T, "--sim", "--gap", "nan", "--out", "o"], "--gap"),
    (["robot", "run", T, "--sim", "--speed", "inf", "--out", "o"], "--speed"),
    (["robot", "run", T, "--sim", "--settle-s", "-1", "--out", "o"], "--settle-s"),
    (["robot", "run", T, "--sim", "--attempts", "0", "--out", "o"], "attempts"),
    (["robot", "run", T, "--sim", "--limits", "adir", "--out", "o"], "--limits"),
    (["robot", "run", T, "--sim", "--out", "afile"], "is a file"),
    (["robot", "run", "no_such_task", "--sim", "--out", "o"], "unknown task"),
    # bench
    (["bench", "perf", "--k", "-1", "--out", "o"], "--k"),
    (["bench", "perf", "--repeats", "0", "--out", "o"], "--repeats"),
    (["bench", "perf", "--task", "no_such_task", "--out", "o"], "unknown task"),
    (["bench", "perf", "--out", "afile"], "is a file"),
    (["bench", "tasks", "--seeds", "x", "--out", "o"], "seeds"),
    (["bench", "tasks", "--seeds", "-1", "--out", "o"], "seeds"),
    (["bench", "tasks", "--workers", "0", "--out", "o"], "--workers"),
    (["bench", "tasks", "no_such_task", "--out", "o"], "unknown task"),
    (["bench", "tasks", T, "--seeds", "1", "--out", "afile"], "is a file"),
    (["bench", "audit", "--seeds", "zz", "--out", "o"], "seeds"),
    (["bench", "audit", "--seeds", "0", "--out", "afile"], "is a file"),
    (["bench", "real2sim", "--seeds", "x", "--out", "o"], "--seeds"),
    (["bench", "real2sim", "--seeds", "-1", "--out", "o"], "--seeds"),
    (["bench", "real2sim", "no_such_task", "--out", "o"], "unknown task"),
    (["bench", "real2sim", "--baseline", "missing.json", "--out", "o"], "missing.json"),
    (["bench", "real2sim", "--baseline", "truncated.json", "--out", "o"], "truncated.json"),
    (["bench", "real2sim", "--baseline", "list.json", "--out", "o"], "list.json"),
    (["bench", "real2sim", T, "--out", "afile"], "is a file"),
    (["bench", "sim2real", "--budget-s", "nan", "--out", "o"], "--budget-s"),
    (["bench", "sim2real", "--budget-s", "-1", "--out", "o"], "--budget-s"),
    (["bench", "sim2real", "--gap-scale", "inf", "--out", "o"], "--gap-scale"),
    (["bench", "sim2real", "--rejected", "-1", "--out", "o"], "--rejected"),
    (["bench", "sim2real", "--workers", "0", "--out", "o"], "--workers"),
    (["bench", "sim2real", "--seeds", "1", "--out", "afile"], "is a file"),
    (["bench", "rope", "--repeats", "0", "--out", "o"], "--repeats"),
    (["bench", "rope", "--out", "afile"], "is a file"),
    (["bench", "mpm", "--steps", "-3", "--out", "o"], "--steps"),
    (["bench", "mpm", "--out", "afile"], "is a file"),
    (["bench", "calvin", "--chains", "0", "--out", "o"], "--chains"),
    (["bench", "calvin", "--start", "1000", "--out", "o"], "--start"),
    (["bench", "calvin", "--out", "afile"], "is a file"),
]


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` that a refused command must leave alone, with its bytes."""
    keep = [root / EARLIER, root / "afile", root / "rec", root / "adir"]
    files: dict[str, bytes] = {}
    for base in keep:
        for p in [base] if base.is_file() else sorted(base.rglob("*")):
            if p.is_file():
                files[str(p.relative_to(root))] = p.read_bytes()
    files["adir entries"] = repr(sorted(os.listdir(root / "adir"))).encode()
    return files


def _id(case: tuple[list[str], str]) -> str:
    return " ".join(case[0])[:80]


@pytest.mark.parametrize("argv, fragment", CASES, ids=[_id(c) for c in CASES])
def test_bad_input_exits_2_in_one_line(corpus_dir: Path, monkeypatch, capsys, argv, fragment) -> None:
    monkeypatch.chdir(corpus_dir)
    shutil.rmtree(corpus_dir / "o", ignore_errors=True)  # what an earlier case wrote there
    before = _snapshot(corpus_dir)
    try:
        status = main(argv)
        parse_error = False
    except SystemExit as exit_:  # argparse: one error line naming the help to read
        status, parse_error = exit_.code, True
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert status == 2, f"exit {status}: {err[-2000:]}"
    assert "Traceback" not in err
    assert len(lines) == 1 and "error:" in lines[0] and fragment in lines[0], err
    if parse_error:
        assert lines[0].endswith("--help)"), err
    assert _snapshot(corpus_dir) == before


def _verbs(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every runnable verb path of ``parser`` (``("bench", "perf")``, ...)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [prefix]
    return [path for name, p in subs[0].choices.items() for path in _verbs(p, (*prefix, name))]


def test_the_corpus_covers_every_subcommand() -> None:
    verbs = _verbs(build_parser())
    missing = [v for v in verbs if not any(tuple(argv[: len(v)]) == v for argv, _ in CASES)]
    assert not missing, f"no bad-input case for {missing}"
    assert len(CASES) >= 100


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes through any permission")
@pytest.mark.parametrize(
    "argv",
    [
        ["rollout", T, "--plan", "locked.json", "--out", "o"],
        ["rollout", T, "--plan", "reference", "--out", "readonly"],
        ["render", T, "--out", "readonly"],
        ["bench", "perf", "--out", "readonly"],
    ],
)
def test_unreadable_and_read_only_paths_exit_2(corpus_dir: Path, monkeypatch, capsys, argv) -> None:
    monkeypatch.chdir(corpus_dir)
    locked = corpus_dir / "locked.json"
    locked.write_text(json.dumps(PLAN))
    locked.chmod(0)
    (corpus_dir / "readonly").mkdir(exist_ok=True)
    (corpus_dir / "readonly").chmod(0o500)
    try:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "Traceback" not in err
    finally:
        locked.chmod(0o600)
        (corpus_dir / "readonly").chmod(0o700)
