"""SimuGuard pictures: a PNG per flagged event and an HTML page per episode."""

from simpact.guard.report import fastest_robot_speed, plot_event, write_report
from simpact.guard.suite import episode, run_episode


def test_report_of_a_flagged_event(tmp_path):
    recording, events = run_episode(episode(3))  # thin_wall: a pusher presses a light box into a wall
    flagged = [e for e in events if e.flagged]
    assert flagged
    speed, names = fastest_robot_speed(recording)
    assert speed.shape == (recording.nsteps,) and names[100] == "fr3_pusher"
    png = plot_event(recording, flagged[0], tmp_path / "one.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = write_report(recording, events, tmp_path / "report", title="thin wall")
    text = page.read_text()
    assert "thin wall" in text and "box" in text and "mm" in text
    images = sorted((tmp_path / "report").glob("*.png"))
    assert len(images) == len(flagged)
    assert images[0].name in text
