"""One tokenizer interface over SentencePiece and Hugging Face tokenizers.

Gemma checkpoints ship either ``tokenizer.model`` (SentencePiece) or ``tokenizer.json`` (Hugging
Face). :class:`Tokenizer` wraps either behind the methods tunixkit needs (``encode`` without special
tokens, ``decode``, ``bos_id``/``eos_id``/``pad_id``, ``token_id`` of a piece) and is itself a valid
tunix tokenizer (tunix's adapter accepts any object with ``encode/decode/bos_id/eos_id/pad_id``), so
the same object goes to tunix's ``Sampler``, ``RLCluster`` and trainers. No caller needs to guess
which kind it holds.

>>> from tunixkit import testing
>>> tok = testing.load_tokenizer()
>>> tok.kind, tok.decode(tok.encode("Tom has 3 pens.")), tok.token_id("<end_of_turn>") is not None
('sentencepiece', 'Tom has 3 pens.', True)
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence
from typing import Any

__all__ = ["Tokenizer", "load"]

END_OF_TURN = "<end_of_turn>"


class Tokenizer:
    """A SentencePiece or Hugging Face tokenizer behind one interface (see the module docstring)."""

    def __init__(self, raw: Any, *, source: str = "") -> None:
        self.raw = raw
        self.source = source
        self.kind = "sentencepiece" if hasattr(raw, "EncodeAsIds") else "huggingface"

    def __repr__(self) -> str:
        return (
            f"Tokenizer({self.kind}, {self.vocab_size} pieces"
            f"{', ' + self.source if self.source else ''})"
        )

    @property
    def vocab_size(self) -> int:
        return int(self.raw.GetPieceSize() if self.kind == "sentencepiece" else len(self.raw))

    def encode(self, text: str, **kwargs: Any) -> list[int]:
        """Token ids of ``text`` without BOS/EOS (tunix and tunixkit add BOS where it belongs)."""
        del kwargs
        if self.kind == "sentencepiece":
            return list(self.raw.EncodeAsIds(text))
        return list(self.raw.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int], **kwargs: Any) -> str:
        ids = [int(i) for i in ids]
        if self.kind == "sentencepiece":
            return self.raw.DecodeIds(ids)
        return self.raw.decode(ids, **kwargs)

    def bos_id(self) -> int | None:
        """The id that opens every sequence, or None for a tokenizer that opens none (Qwen's and
        SmolLM2's: their ``bos_token``, if any, is not prepended, and their chat template writes
        none). tunix's sampler and DPO trainer prepend a BOS only when this is truthy."""
        if self.kind == "sentencepiece":
            bos = self.raw.bos_id()
            return None if bos < 0 else int(bos)
        if "_bos" not in self.__dict__:
            ids = self.raw("a", add_special_tokens=True)["input_ids"]
            bos = self.raw.bos_token_id
            self._bos = int(ids[0]) if bos is not None and ids and ids[0] == bos else None
        return self._bos

    def with_bos(self, ids: Sequence[int]) -> list[int]:
        """``ids`` with this tokenizer's BOS in front (as they are when it has none)."""
        bos = self.bos_id()
        return [int(i) for i in ids] if bos is None else [bos, *(int(i) for i in ids)]

    def eos_id(self) -> int:
        return int(self.raw.eos_id() if self.kind == "sentencepiece" else self.raw.eos_token_id)

    def pad_id(self) -> int:
        """The padding id; a Hugging Face tokenizer without one pads with EOS (as tunix does)."""
        if self.kind == "sentencepiece":
            pad = self.raw.pad_id()
            if pad < 0:
                raise ValueError(f"{self.source or 'tokenizer'}: SentencePiece model has no pad id")
            return int(pad)
        pad = self.raw.pad_token_id
        return int(self.eos_id() if pad is None else pad)

    def token_id(self, piece: str) -> int | None:
        """The id of a single piece (e.g. ``<end_of_turn>``), or None if the vocabulary lacks it."""
        if self.kind == "sentencepiece":
            i = self.raw.PieceToId(piece)
            return None if i == self.raw.unk_id() and piece != self.raw.IdToPiece(i) else int(i)
        i = self.raw.convert_tokens_to_ids(piece)
        return None if i is None or i == self.raw.unk_token_id else int(i)

    def stop_ids(self, end_of_turn: str = END_OF_TURN) -> list[int]:
        """EOS plus the end-of-turn id: where a chat answer stops. Gemma ends a turn with
        ``<end_of_turn>`` and often writes on after it; without that id the sampler runs to its
        token limit (tunix issues #592, #842)."""
        ids = {self.eos_id(), self.token_id(end_of_turn)}
        return sorted(i for i in ids if i is not None)

    def dedup_bos_ids(self, ids: list[int]) -> list[int]:
        """tunix's sampler calls this on ``[BOS] + encode(prompt)``: keep a single leading BOS."""
        if self.bos_id() is None:
            return ids
        i = 0
        while i < len(ids) - 1 and ids[i] == ids[i + 1] == self.bos_id():
            i += 1
        return ids[i:]

    def __getattr__(self, name: str) -> Any:  # anything else tunix asks of the raw tokenizer
        if name == "raw":
            raise AttributeError(name)
        return getattr(self.raw, name)


def load(folder: str | pathlib.Path) -> Tokenizer:
    """The tokenizer of a model folder: ``tokenizer.model`` (SentencePiece) or
    ``tokenizer.json``."""
    folder = pathlib.Path(folder)
    if (folder / "tokenizer.model").is_file():
        import sentencepiece as spm

        path = folder / "tokenizer.model"
        return Tokenizer(spm.SentencePieceProcessor(model_file=str(path)), source=str(path))
    if (folder / "tokenizer.json").is_file():
        from transformers import AutoTokenizer

        return Tokenizer(AutoTokenizer.from_pretrained(str(folder)), source=str(folder))
    raise FileNotFoundError(
        f"{folder}: no tokenizer.model or tokenizer.json next to the weights "
        "(copy the base model's tokenizer files into this folder)"
    )
