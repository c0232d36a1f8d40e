"""Logit distillation glue: vocabulary check, tunix's ``LogitStrategy`` wiring, held-out losses.

The trainer is tunix's ``DistillationTrainer`` with ``strategies.LogitStrategy``; tunix logs only
their weighted sum. :func:`heldout_losses` measures the parts separately on held-out examples, on
the answer tokens only: the student's KL divergence to the teacher, the soft (distillation) loss
at the training temperature, and the hard (task) cross-entropy of student and teacher.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from tunixkit import _compat, families, prompting
from tunixkit.training import model_inputs_fn, tokenize_pair

if TYPE_CHECKING:
    import jax
    import optax
    from flax import nnx
    from tunix.distillation import distillation_trainer, strategies

    from tunixkit.models import LoadedModel

__all__ = [
    "trainer",
    "VocabularyMismatch",
    "check_vocab",
    "forward",
    "heldout_losses",
    "strategy",
]


class VocabularyMismatch(ValueError):
    """Teacher and student do not share a vocabulary: their logits cannot be compared."""


def check_vocab(teacher: LoadedModel, student: LoadedModel) -> None:
    """Raise :class:`VocabularyMismatch` unless both models have the same vocabulary size and their
    tokenizers encode a probe text (chat markers, tags, digits, words) to the same ids."""
    nt, ns = families.vocab_size(teacher.config), families.vocab_size(student.config)
    if nt != ns:
        raise VocabularyMismatch(
            f"teacher {teacher.model_id} has {nt} vocabulary entries, student {student.model_id} "
            f"{ns}: logit distillation needs one vocabulary (pick a student of the same family)"
        )
    probe = prompting.format_prompt(
        "Tom has 12 apples and buys 30 more."
    ) + prompting.format_completion("12 + 30 = 42", "42")
    a = tokenize_pair(teacher.tokenizer, probe, "", 512)[0]
    b = tokenize_pair(student.tokenizer, probe, "", 512)[0]
    if not np.array_equal(a, b):
        first = int(np.argmax(a != b))
        raise VocabularyMismatch(
            f"teacher and student tokenizers disagree at token {first} of a probe text "
            f"({a[first]} vs {b[first]}): same vocabulary size, different tokenizers"
        )


def forward(
    model: nnx.Module,
    input_tokens: jax.Array,
    input_mask: jax.Array,
    positions: jax.Array,
    attention_mask: jax.Array,
) -> jax.Array:
    """Next-token logits for every position but the last (what the labels line up with)."""
    del input_mask
    logits, _ = model(input_tokens, positions, None, attention_mask)
    return logits[:, :-1, :]


def strategy(vocab_size: int, *, temperature: float, alpha: float) -> strategies.LogitStrategy:
    """tunix's ``LogitStrategy``: ``alpha`` x soft loss (KL at ``temperature``, scaled by its
    square) + (1 - ``alpha``) x hard loss (cross-entropy), each averaged over the answer tokens
    (:class:`tunixkit._compat.AnswerTokenLogitStrategy`; tunix averages the KL over the prompt's and
    the padding's positions too)."""
    import jax

    def labels(input_tokens, input_mask, positions, attention_mask):
        del positions, attention_mask
        return jax.nn.one_hot(input_tokens[:, 1:], vocab_size) * input_mask[:, 1:, None]

    return _compat.AnswerTokenLogitStrategy(  # tunix's, its soft loss on answer tokens only
        student_forward_fn=forward,
        teacher_forward_fn=forward,
        labels_fn=labels,
        temperature=temperature,
        alpha=alpha,
    )


def trainer(
    student: nnx.Module,
    teacher: nnx.Module,
    strategy_: strategies.LogitStrategy,
    optimizer: optax.GradientTransformation,
    config: distillation_trainer.TrainingConfig,
    *,
    pad_id: int,
) -> distillation_trainer.DistillationTrainer:
    """tunix's ``DistillationTrainer``: ``student`` learns ``teacher``'s logits by ``strategy_``
    (:func:`strategy`), fed SFT batches through :func:`tunixkit.training.model_inputs_fn`. The one
    distillation builder: notebook 04 and the memory plan build theirs here."""
    from tunix.distillation import distillation_trainer

    return distillation_trainer.DistillationTrainer(
        student, teacher, strategy_, optimizer, config
    ).with_gen_model_input_fn(model_inputs_fn(pad_id))


def _batch_sums(student, teacher, inputs: dict[str, Any], temperature: float) -> np.ndarray:
    from flax import nnx

    # One compiled program: eager ops on sharded models can deadlock emulated CPU devices.
    return np.asarray(nnx.jit(_sums, static_argnums=3)(student, teacher, inputs, temperature))


def _sums(student, teacher, inputs: dict[str, Any], temperature: float):
    import jax
    import jax.numpy as jnp

    s = forward(student, **inputs).astype(jnp.float32)
    t = forward(teacher, **inputs).astype(jnp.float32)
    mask = inputs["input_mask"][:, 1:].astype(jnp.float32)
    target = inputs["input_tokens"][:, 1:]

    def kl(temp):
        lt, ls = jax.nn.log_softmax(t / temp), jax.nn.log_softmax(s / temp)
        return jnp.sum(jnp.exp(lt) * (lt - ls), -1)

    def ce(logits):
        return -jnp.take_along_axis(jax.nn.log_softmax(logits), target[..., None], -1)[..., 0]

    parts = [kl(1.0), temperature**2 * kl(temperature), ce(s), ce(t)]
    return jnp.stack([jnp.sum(p * mask) for p in parts] + [jnp.sum(mask)])


def heldout_losses(
    student: nnx.Module,
    teacher: nnx.Module,
    batches: Iterable[Any],
    *,
    pad_id: int,
    temperature: float,
) -> dict[str, float]:
    """Per answer token on ``batches`` (``TrainingInput``): ``kl`` (teacher || student at T=1),
    ``soft`` (T^2 x KL at ``temperature``, the distillation loss), ``student_loss`` and
    ``teacher_loss`` (cross-entropy on the reference answer, the hard loss)."""
    to_inputs = model_inputs_fn(pad_id)
    total = sum(_batch_sums(student, teacher, to_inputs(b), temperature) for b in batches)
    kl, soft, hard_s, hard_t, n = total
    return {
        "kl": float(kl / n),
        "soft": float(soft / n),
        "student_loss": float(hard_s / n),
        "teacher_loss": float(hard_t / n),
    }
