"""Pictures of SimuGuard events: per flagged event a PNG of the body's speed over time with the onset marked
and the robot's fastest link for comparison (as SimuGuard's Figure 1), and an HTML page per episode.

matplotlib is imported lazily (Agg backend), only when a picture is drawn.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simpact.guard.detector import Event
from simpact.guard.energy import EnergyAudit, EnergyGain
from simpact.guard.store import Recording

__all__ = ["fastest_robot_speed", "plot_episode", "plot_event", "write_report"]


def fastest_robot_speed(recording: Recording) -> tuple[np.ndarray, list[str]]:
    """(n,) speed of the fastest robot link at each step, m/s (zeros without robot links), and for each
    step that link's name."""
    robot = np.flatnonzero(np.asarray(recording.manifest.roles) == "robot")
    n = recording.nsteps
    if robot.size == 0:
        return np.zeros(n), [""] * n
    speed = np.linalg.norm(recording.vel[:, robot], axis=-1)
    best = np.argmax(speed, axis=1)
    names = [recording.manifest.bodies[robot[i]] for i in best]
    return speed[np.arange(n), best], names


def plot_event(recording: Recording, event: Event, path: str | Path, window_s: float = 0.5) -> Path:
    """Draw ``event``: the body's speed (m/s) against time (s) within ``window_s`` of the onset, the onset
    marked, the fastest robot link's speed for comparison, contact pair and depth at onset in the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = recording.time
    lo = int(np.searchsorted(t, event.onset_s - window_s))
    hi = int(np.searchsorted(t, event.onset_s + window_s, side="right"))
    speed = recording.speed(event.body_id)
    robot, names = fastest_robot_speed(recording)
    fig, ax = plt.subplots(figsize=(7.0, 3.6), dpi=100)
    try:
        ax.plot(t[lo:hi], speed[lo:hi], color="tab:red", lw=1.6, label=f"{event.body} (object)")
        if any(names):
            link = names[event.onset_step]
            ax.plot(t[lo:hi], robot[lo:hi], color="tab:blue", lw=1.2, label=f"fastest robot link ({link})")
        ax.axvline(event.onset_s, color="k", ls="--", lw=1.0, label=f"onset {event.onset_s:.3f} s")
        ax.plot([event.peak_s], [event.peak_speed], "o", color="tab:red", ms=5)
        pair = " / ".join(p for p in event.contact_pair if p) or "no contact"
        ax.set_title(
            f"{event.body}: {event.speed_before:.2f} -> {event.peak_speed:.2f} m/s, "
            f"+{event.kinetic_energy_gained:.3g} J\ncontact at onset: {pair}, "
            f"depth {1000 * event.contact_depth:.1f} mm",
            fontsize=9,
        )
        ax.set_xlabel("time (s)")
        ax.set_ylabel("speed (m/s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def plot_episode(
    recording: Recording,
    energy: EnergyAudit,
    gain: EnergyGain,
    events: Sequence[Event],
    path: str | Path,
    title: str,
) -> Path:
    """A whole suite episode in two panels: above, the speed (m/s) of every object and the fastest robot
    link, each detector event marked at its onset (red: flagged, orange: a consequence, grey: stopped by a
    stage); below, the unexplained energy (J) of the energy audit with its largest rise shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = recording.time
    roles = np.asarray(recording.manifest.roles)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 5.2), dpi=100, sharex=True)
    try:
        for b in np.flatnonzero(roles == "object")[:8]:
            top.plot(t, recording.speed(int(b)), lw=1.2, label=recording.manifest.bodies[b])
        robot, names = fastest_robot_speed(recording)
        if any(names):
            top.plot(t, robot, color="k", lw=0.8, ls=":", label="fastest robot link")
        for e in events:
            color = "tab:red" if e.flagged else "tab:orange" if e.consequence_of is not None else "0.6"
            top.axvline(e.onset_s, color=color, ls="--", lw=1.0)
            top.annotate(
                f"{e.body} {e.peak_speed:.1f} m/s", (e.onset_s, e.peak_speed), fontsize=7, color=color
            )
        top.set_ylabel("speed (m/s)")
        top.legend(fontsize=7, loc="upper right")
        top.grid(alpha=0.3)
        top.set_title(title, fontsize=9)
        u = energy.unexplained()
        bottom.plot(t[: len(u)], u, color="tab:purple", lw=1.2, label="objects' energy - robot work")
        if gain.gain > 0 and gain.step < len(t):
            bottom.axvspan(t[gain.start], t[gain.step], color="tab:purple", alpha=0.2)
            bottom.annotate(
                f"+{gain.gain:.3g} J ({gain.body}, as {gain.speed:.2f} m/s)",
                (t[gain.step], u[gain.step]),
                fontsize=8,
            )
        bottom.set_xlabel("time (s)")
        bottom.set_ylabel("unexplained energy (J)")
        bottom.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(path)
    finally:
        plt.close(fig)
    return path


def _row(event: Event, image: str | None) -> str:
    d: dict[str, Any] = event.to_dict()
    stages = "<br>".join(
        f"{name}: {'pass' if v['passed'] else 'stop'} ({html.escape(v['reason'])})"
        for name, v in d["stages"].items()
    )
    pair = html.escape(" / ".join(p for p in event.contact_pair if p) or "none")
    img = f'<img src="{html.escape(image)}" width="560">' if image else ""
    return (
        f"<tr><td>{html.escape(event.body)}</td><td>{'yes' if event.flagged else 'no'}</td>"
        f"<td>{event.onset_s:.3f} (step {event.onset_step})</td><td>{event.peak_speed:.2f}</td>"
        f"<td>{event.kinetic_energy_gained:.3g}</td><td>{pair}, {1000 * event.contact_depth:.1f} mm</td>"
        f"<td>{stages}</td><td>{img}</td></tr>"
    )


def write_report(
    recording: Recording, events: Sequence[Event], out: str | Path, title: str = "SimuGuard audit"
) -> Path:
    """``out/index.html`` listing every event (flagged first) with a PNG per flagged event
    (``out/event_XX.png``); returns the page's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ordered = sorted(events, key=lambda e: (not e.flagged, e.onset_step))
    rows = []
    for i, event in enumerate(ordered):
        image = None
        if event.flagged:
            image = f"event_{i:02d}_{event.body}.png"
            plot_event(recording, event, out / image)
        rows.append(_row(event, image))
    flagged = sum(e.flagged for e in events)
    head = "<tr><th>body</th><th>flagged</th><th>onset (s)</th><th>peak (m/s)</th><th>KE gained (J)</th>"
    head += "<th>contact at onset</th><th>stages</th><th>speed over time</th></tr>"
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif}} td,th{{border:1px solid #ccc;padding:4px;vertical-align:top}}
table{{border-collapse:collapse}}</style></head>
<body><h1>{html.escape(title)}</h1>
<p>{recording.nsteps} steps of {recording.manifest.timestep * 1000:g} ms;
{len(events)} events, {flagged} flagged.</p>
<table>{head}{"".join(rows)}</table></body></html>
"""
    path = out / "index.html"
    path.write_text(page)
    return path
