"""scripts/pip_settings.py: set-up hands uv the package sources pip would use (its files, PIP_* variables)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pip_settings.py"

# `pip config list` on a machine with a local mirror in its config file and wheels named in the environment.
CONFIG_LIST = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/other.pem'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/elsewhere'
global.index-url='https://mirror.example/simple'
install.index-url='https://install-mirror.example/simple'
"""


def _arguments(config_list: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT)], input=config_list, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def test_every_source_is_passed_on_the_weightiest_setting_winning() -> None:
    assert _arguments(CONFIG_LIST) == [
        "--index-url",
        "https://install-mirror.example/simple",  # [install] over [global]
        "--extra-index-url",
        "file:///opt/pypi/simple",
        "--extra-index-url",
        "file:///opt/pypi-more/simple",
        "--find-links",
        "/opt/wheels",  # the environment over the config file
        "--constraint",
        "/etc/xdg/pip/constraints.txt",
        "--index-strategy",
        "unsafe-best-match",  # pip's choice: the best version of all places, not the first place's
        "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
    ]


def test_no_setting_passes_nothing_and_no_index_is_kept() -> None:
    assert _arguments("") == []
    assert _arguments("global.index-url=\nnot a setting\n") == []
    assert _arguments(":env:.no-index='true'\n:env:.default-timeout='60'\n") == ["--no-index"]


def test_set_up_reads_pip_itself() -> None:
    """What this Python's pip reports (its config files, PIP_* variables) is read without error: a variable
    set here comes out as uv's argument."""
    env = dict(os.environ, PIP_EXTRA_INDEX_URL="file:///somewhere/simple", PIP_CONFIG_FILE=os.devnull)
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], env=env, capture_output=True, text=True, check=True
    )
    args = _arguments(pip.stdout)
    assert args[args.index("--extra-index-url") + 1] == "file:///somewhere/simple"
