"""Every result.json names the machine its timings come from."""

import json
import os

from simpact.core.machine import cpu_model, machine
from simpact.core.rundir import RunRecord


def test_the_cpu_model_is_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\nflags\t: fpu\n")
    assert cpu_model(info) == "AMD EPYC 9B14"
    assert cpu_model(tmp_path / "absent")  # elsewhere: what the platform module says, never empty


def test_the_record_names_the_machine(tmp_path):
    with RunRecord.start(tmp_path, "bench perf", {}) as run:
        run.update(seconds=1.0)
    recorded = json.loads(run.path.read_text())["machine"]
    assert recorded == machine() and 1 <= recorded["cpus"] <= (os.cpu_count() or 1)
    assert recorded["cpu"] and recorded["python"].count(".") == 2
