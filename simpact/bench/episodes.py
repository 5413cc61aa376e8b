"""One resumable episode log for the benchmarks (``bench tasks``, ``bench sim2real``, ``bench audit``).

``DIR/runs.jsonl`` holds one JSON line per finished episode, appended and flushed by the parent process as
the episode finishes, so a killed benchmark neither loses nor repeats one. Each line carries ``task``,
``seed`` and ``settings``: a short hash of everything that changes the episode's result (the benchmark, the
planner or method and its options, the task file's content with its skeleton, the detector's thresholds,
the VLM settings). An episode is done when a line with its (task, seed) and its current ``settings`` is in
the log; a rerun into the same folder skips those and runs the others. Lines written under other settings
stay in the file but are not counted (:attr:`EpisodeLog.ignored`), so a rerun after a change never reports
a stale episode. A torn last line (a kill mid-write) is cut off.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from simpact.core.errors import SimpactError
from simpact.core.jsonio import to_jsonable
from simpact.tasks import load_task

__all__ = [
    "RUNS",
    "BenchError",
    "EpisodeLog",
    "Progress",
    "duration",
    "ignored_note",
    "parse_seeds",
    "settings_id",
    "task_settings",
]

RUNS = "runs.jsonl"
"""The episode log's file name in a benchmark's output folder."""

Key = tuple[str, int]
"""An episode: (task, seed)."""


class BenchError(SimpactError, ValueError):
    """Bad benchmark input (a malformed log, a missing executor): reported in one line."""


def parse_seeds(text: str) -> list[int]:
    """``"1-10"``, ``"0,3,5"`` or ``"0,2-4"`` to a list of seeds."""
    seeds: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        try:
            seeds.extend(range(int(low), int(high or low) + 1))
        except ValueError:
            raise ValueError(f"seeds: cannot read {part!r}; write e.g. 1-10 or 0,3,5") from None
    return seeds


def settings_id(settings: Mapping[str, Any]) -> str:
    """A short hash (12 hex digits) of ``settings``, independent of key order."""
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def task_settings(tasks: Sequence[str], common: Mapping[str, Any]) -> dict[str, str]:
    """Each task's settings id: ``common`` with the content of its task file (skeleton included; comments
    and layout do not count)."""
    return {name: settings_id({**common, "task_file": load_task(name).raw}) for name in tasks}


def ignored_note(ignored: int) -> str:
    """The summary line's note on log lines under other settings ("" when there are none)."""
    return f"{ignored} earlier episodes under other settings ignored" if ignored else ""


class EpisodeLog:
    """``out/runs.jsonl`` read for the tasks of ``settings`` (task -> its settings id, see
    :func:`task_settings`): :attr:`done` holds the records under the current settings by (task, seed),
    :attr:`ignored` counts the lines of these tasks written under other settings."""

    def __init__(self, out: Path, settings: Mapping[str, str]) -> None:
        self.path = Path(out) / RUNS
        self.settings = dict(settings)
        self.done: dict[Key, dict[str, Any]] = {}
        self.ignored = 0
        for record in self._read():
            task = record.get("task")
            if task not in self.settings:
                continue  # another task's episode: not ours to count
            if record.get("settings") == self.settings[task]:
                self.done[(task, record["seed"])] = record
            else:
                self.ignored += 1

    def _read(self) -> list[dict[str, Any]]:
        """The log's records; a torn last line is cut off the file."""
        if not self.path.exists():
            return []
        text = self.path.read_text()
        if text and not text.endswith("\n"):
            text = text[: text.rfind("\n") + 1]
            self.path.write_text(text)
        records = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise BenchError(
                    f"{self.path}:{number}: not a JSON line ({exc.msg}); choose another --out"
                ) from None
        return records

    def todo(self, wanted: Iterable[Key]) -> list[Key]:
        """The episodes of ``wanted`` not yet done under the current settings, in order."""
        return [key for key in wanted if key not in self.done]

    def records(self, wanted: Iterable[Key]) -> list[dict[str, Any]]:
        """The done records of ``wanted``, in order."""
        return [self.done[key] for key in wanted if key in self.done]

    def append(
        self, records: Iterable[dict[str, Any]], on_record: Callable[[dict[str, Any]], None] | None = None
    ) -> list[dict[str, Any]]:
        """Append each finished episode's record, stamped with its task's ``settings``, to the log as it
        arrives (one flushed line) and to :attr:`done`; the records that carry an ``error`` are returned
        instead (not logged: retried on resume). ``on_record`` sees every record as it arrives."""
        errors: list[dict[str, Any]] = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as sink:
            for record in records:
                if "error" in record:
                    errors.append(record)
                else:
                    record = {**record, "settings": self.settings[record["task"]]}
                    sink.write(json.dumps(record, default=to_jsonable) + "\n")
                    sink.flush()
                    self.done[(record["task"], record["seed"])] = record
                if on_record is not None:
                    on_record(record)
        return errors


# --- progress -------------------------------------------------------------------------------------------


def duration(seconds: float) -> str:
    """``42s``, ``3m05s`` or ``1h02m``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{seconds:02d}s"


class Progress:
    """Done/total, successes, elapsed time and ETA on ``stream``: one ``\\r``-updated line on a terminal,
    a plain line per episode otherwise."""

    def __init__(self, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.total = self.done = self.ok = self.resumed = 0
        self.t0 = time.perf_counter()

    def start(self, total: int, records: Sequence[Mapping[str, Any]], ignored: int = 0) -> None:
        """``total`` episodes, of which ``records`` are already in the log; ``ignored`` lines are under
        other settings."""
        self.total, self.resumed = total, len(records)
        self.done, self.ok = len(records), sum(bool(r["success"]) for r in records)
        self.t0 = time.perf_counter()
        if self.resumed:
            self._emit(f"resuming: {self.resumed} of {total} episodes already in {RUNS}")
        if ignored:
            self._emit(f"{ignored_note(ignored)} (in {RUNS})")
        self._bar()

    def record(self, record: Mapping[str, Any]) -> None:
        if "error" in record:
            self._emit(f"  ERROR {record['task']} seed {record['seed']}: {record['error']}")
        else:
            self.done += 1
            self.ok += bool(record["success"])
            verdict = "ok  " if record["success"] else "FAIL"
            rollouts = record.get("simulated_rollouts", record["rollouts"])  # the search's, not the verified
            self._emit(
                f"  {verdict} {record['task']} seed {record['seed']}: score {record['score']:.3f}, "
                f"{rollouts} rollouts, {record['plan_wall_s']:.1f} s"
            )
        self._bar()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def status(self) -> str:
        elapsed = time.perf_counter() - self.t0
        ran = self.done - self.resumed
        left = self.total - self.done
        eta = duration(elapsed / ran * left) if ran else "?"
        return (
            f"[{self.done}/{self.total}] {self.ok} ok, elapsed {duration(elapsed)}, "
            f"ETA {eta if left else '0s'}"
        )

    def _emit(self, line: str) -> None:
        if self.tty:
            line = "\r\033[K" + line + "\n"
        else:
            line = f"{line}  {self.status()}\n" if line.startswith("  ") else line + "\n"
        self.stream.write(line)
        self.stream.flush()

    def _bar(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + self.status())
            self.stream.flush()
