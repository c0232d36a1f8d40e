"""Test-only: make a training process stop dead right after a given checkpoint, so a test can
SIGKILL it at a known step instead of guessing from the clock.

A test puts this folder on the child's ``PYTHONPATH`` and sets

- ``TUNIXKIT_TEST_HANG_AT=N``: once tunix's checkpoint manager has saved step N and the save is
  committed, the process writes ``hanging at N`` to stderr and blocks forever (the test kills it);
- ``TUNIXKIT_TEST_HANG_IN=TEXT`` (optional): only for a checkpoint folder whose path holds TEXT
  (notebook 06 has a checkpoint folder per stage).

Or, instead of hanging, ``TUNIXKIT_TEST_CLOCK_ENDS_AT=N``: once checkpoint N is saved (in a folder
holding ``TUNIXKIT_TEST_HANG_IN``), the session clock has run out (``Session.remaining`` is 0 from
then on): the session's end as an event, for a stage whose deadline is the session's end.

Without either variable this module does nothing. The hook is installed when
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
    hang = os.environ.get("TUNIXKIT_TEST_HANG_AT")
    at = int(hang or os.environ["TUNIXKIT_TEST_CLOCK_ENDS_AT"])
    where = os.environ.get("TUNIXKIT_TEST_HANG_IN", "")
    save = module.CheckpointManager.save

    def save_then_hang(self, step, *args, **kwargs):
        saved = save(self, step, *args, **kwargs)
        manager = getattr(self, "_checkpoint_manager", None)
        if saved and step == at and manager is not None and where in str(manager.directory):
            manager.wait_until_finished()
            if not hang:  # the session's end, from now on
                from tunixkit import session

                session.Session.remaining = lambda self: 0.0
                print(f"the session clock ends at {step}", file=sys.stderr, flush=True)
                return saved
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


if os.environ.get("TUNIXKIT_TEST_HANG_AT") or os.environ.get("TUNIXKIT_TEST_CLOCK_ENDS_AT"):
    sys.meta_path.insert(0, _Finder())
