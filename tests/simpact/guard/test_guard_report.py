"""SimuGuard pictures: a PNG per flagged event, an HTML page per episode, a whole episode for the bench."""

from simpact.guard.labels import simulate
from simpact.guard.report import fastest_robot_speed, plot_episode, plot_event, write_report
from simpact.guard.suite import episode

PNG = b"\x89PNG\r\n\x1a\n"


def test_pictures_of_a_flagged_event(tmp_path):
    run = simulate(episode(0))  # overlap: an object created inside another is thrown out
    recording, events = run.recording, run.events
    flagged = [e for e in events if e.flagged]
    assert flagged
    speed, names = fastest_robot_speed(recording)
    assert speed.shape == (recording.nsteps,) and names[100].startswith(("fr3_", "hand", "left", "right"))
    assert plot_event(recording, flagged[0], tmp_path / "one.png").read_bytes()[:8] == PNG
    whole = plot_episode(recording, run.energy, run.gain, events, tmp_path / "episode.png", "overlap")
    assert whole.read_bytes()[:8] == PNG
    page = write_report(recording, events, tmp_path / "report", title="overlap")
    text = page.read_text()
    assert "overlap" in text and flagged[0].body in text and "mm" in text
    images = sorted((tmp_path / "report").glob("*.png"))
    assert len(images) == len(flagged) and images[0].name in text
