"""Test-only: make a training process stop dead right after a given checkpoint, so a test can
SIGKILL it at a known step instead of guessing from the clock.

A test puts this folder on the child's ``PYTHONPATH`` and sets

- ``TUNIXKIT_TEST_HANG_AT=N``: once tunix's checkpoint manager has saved step N and the save is
  committed, the process writes ``hanging at N`` to stderr and blocks forever (the test kills it);
- ``TUNIXKIT_TEST_HANG_IN=TEXT`` (optional): only for a checkpoint folder whose path holds TEXT
  (notebook 06 has a checkpoint folder per stage).

Without ``TUNIXKIT_TEST_HANG_AT`` this module does nothing. The hook is installed when
``tunix.sft.checkpoint_manager`` is imported (every tunix trainer saves through it), so the
process's imports are not changed before then.
"""

import importlib.abc
import importlib.util
import os
import sys
import threading

_MODULE = "tunix.sft.checkpoint_manager"


def _patch(module) -> None:
    at, where = (
        int(os.environ["TUNIXKIT_TEST_HANG_AT"]),
        os.environ.get("TUNIXKIT_TEST_HANG_IN", ""),
    )
    save = module.CheckpointManager.save

    def save_then_hang(self, step, *args, **kwargs):
        saved = save(self, step, *args, **kwargs)
        manager = getattr(self, "_checkpoint_manager", None)
        if saved and step == at and manager is not None and where in str(manager.directory):
            manager.wait_until_finished()
            print(f"hanging at {step} ({manager.directory})", file=sys.stderr, flush=True)
            threading.Event().wait()
        return saved

    module.CheckpointManager.save = save_then_hang


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("TUNIXKIT_TEST_HANG_AT"):
    sys.meta_path.insert(0, _Finder())
