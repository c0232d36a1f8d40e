"""nbval, made to keep a long cell's output: imported by ``notebooks/conftest.py`` (and by
``tests/test_nbval_drain.py``, which shows what it mends).

nbval reads a kernel's IOPub messages only once the cell's reply has come, so while a cell runs,
its output waits in ZeroMQ's queues: 1,000 messages a side plus what the sockets buffer. A cell
whose progress bars and prints pass that (a bar sends about three messages a refresh: 09's adapters
cell sent 1,519 in smoke, a full-profile training cell many times that) has the rest dropped, the
last of them the kernel's "idle"; nbval then waits 5 s for it, fails the cell with "Timeout of 5
seconds exceeded waiting for output", stops the kernel and marks every later cell xfail. Here a
thread reads IOPub from the moment the kernel starts, into a queue nbval reads instead, so nothing
is dropped; and nbval waits up to ``OUTPUT_SECONDS`` (not 5) for a finished cell's last messages,
which a kernel on a loaded 2-core machine can be slow to send.
"""

from __future__ import annotations

import queue
import threading

from nbval import kernel as _kernel
from nbval import plugin as _plugin

OUTPUT_SECONDS = 60

_init, _stop = _kernel.RunningKernel.__init__, _kernel.RunningKernel.stop
_cell_init = _plugin.IPyNbCell.__init__


def _draining_init(self, *args, **kwargs) -> None:
    _init(self, *args, **kwargs)  # started, and IOPub answered once
    messages: queue.Queue = queue.Queue()
    done = threading.Event()
    channel = self.kc.iopub_channel

    def drain() -> None:
        while not done.is_set():
            try:
                messages.put(channel.get_msg(timeout=0.2))
            except queue.Empty:
                continue

    thread = threading.Thread(target=drain, name="nbval-iopub-drain", daemon=True)
    thread.start()
    self._drain = (done, thread)
    self.kc.get_iopub_msg = lambda timeout=None: messages.get(timeout=timeout)


def _draining_stop(self) -> None:
    done, thread = getattr(self, "_drain", (None, None))
    if done is not None:
        done.set()
        thread.join()  # before the channels close: a ZeroMQ socket is not shared across threads
    _stop(self)


def _cell_init_patient(self, *args, **kwargs) -> None:
    _cell_init(self, *args, **kwargs)
    self.output_timeout = OUTPUT_SECONDS


_kernel.RunningKernel.__init__ = _draining_init
_kernel.RunningKernel.stop = _draining_stop
_plugin.IPyNbCell.__init__ = _cell_init_patient
