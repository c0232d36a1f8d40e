"""Kill a training process at a known step: the child hangs right after a given checkpoint is
committed (``tests/hang/sitecustomize.py``) and the test SIGKILLs it then. Nothing waits on the
clock, so a busy machine changes how long a test takes, never where the kill lands."""

from __future__ import annotations

import os
import pathlib
import subprocess
import time

HANG = pathlib.Path(__file__).resolve().with_name("hang")


def hang_at(env: dict, step: int, where: str = "") -> dict:
    """``env`` for a child that hangs after saving checkpoint ``step`` (in a folder holding
    ``where``)."""
    paths = [str(HANG), *filter(None, [env.get("PYTHONPATH")])]
    out = dict(env, PYTHONPATH=os.pathsep.join(paths), TUNIXKIT_TEST_HANG_AT=str(step))
    if where:
        out["TUNIXKIT_TEST_HANG_IN"] = where
    return out


def kill_when_hanging(proc: subprocess.Popen, log: pathlib.Path, step: int) -> str:
    """SIGKILL ``proc`` once its log (stdout and stderr) says it hangs at ``step``; fail if it
    ends first. Returns the log."""
    while f"hanging at {step} " not in (text := log.read_text()):
        rc = proc.poll()
        assert rc is None, (
            f"the run ended (exit {rc}) before its checkpoint {step}:\n{text[-3000:]}"
        )
        time.sleep(0.2)
    proc.kill()  # SIGKILL: no cleanup, no final checkpoint
    proc.wait()
    return text
