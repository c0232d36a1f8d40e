"""Rebuild the tiny offline tokenizer shipped in tunixkit/assets (deterministic).

Run: .venv/bin/python scripts/build_tokenizer.py   (then commit tunixkit/assets/tiny_tokenizer.model)
tests/test_smoke.py checks that a rebuild is byte-identical to the shipped file.
"""

import pathlib

from tunixkit.testing import build_tokenizer, load_tokenizer

out = build_tokenizer(
    pathlib.Path(__file__).resolve().parents[1] / "tunixkit" / "assets" / "tiny_tokenizer"
)
pathlib.Path(out).with_suffix(".vocab").unlink(missing_ok=True)
sp = load_tokenizer(out)
print(
    f"wrote {out}: vocab {sp.vocab_size}, pad/unk/bos/eos {sp.pad_id()}/{sp.unk_id()}/{sp.bos_id()}/{sp.eos_id()}"
)
