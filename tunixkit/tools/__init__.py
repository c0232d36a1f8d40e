"""Tools built on the library, which no library module imports.

- :mod:`tunixkit.tools.memplan`: the memory plan, each recipe's step programs compiled at their real
  shapes on emulated devices, bytes per device against the chip's memory (notebooks 01-04 call
  ``memplan.check`` before loading weights; ``python -m tunixkit.tools.memplan`` from a shell);
- :mod:`tunixkit.tools.doctor`: checks that the installed tunix offers every API tunixkit uses
  (``python -m tunixkit.tools.doctor``, run by the setup script);
- :mod:`tunixkit.tools.judges_check`: the judged model loaded and asked with tunix alone, as the
  judges would; it imports no tunixkit, to be copied into a submission as it is (notebooks 02 and
  06 run it; ``python -m tunixkit.tools.judges_check ROOT``);
- :mod:`tunixkit.tools.deps`: the pip line for tunix's own dependencies this Python lacks, from
  installed metadata alone (the setup script asks it before anything imports tunix).

They may use tunix's private names (the memory plan re-wires tunix's trainers to compile without
running); the library keeps its tunix workarounds in :mod:`tunixkit._compat`.
"""
