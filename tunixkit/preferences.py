"""Preference data for DPO/ORPO: pairs from the model's own samples or a dataset, tokenized, scored.

- :func:`on_policy_pairs`: sample answers to GSM8K questions; a correct, well-formatted answer
  becomes *chosen* and a wrong or badly formatted one *rejected* (works offline).
- :func:`dataset_pairs`: any preference dataset (Hugging Face id or local file) mapped to
  prompt/chosen/rejected columns.
- :func:`training_pairs`: either source, built once and kept in ``OUTPUT_DIR`` (a rerun or a resumed
  session trains on exactly the same pairs; ``recipe.json`` guards against stale ones).
- :func:`preference_dataset`: tokenized batches for tunix's ``DPOTrainer``. tunix's own string
  path puts a BOS token in front of every *response* (``[BOS] prompt [BOS] answer``), a sequence the
  model never sees when it generates; here the response follows the prompt directly.
- :func:`score`: on held-out pairs, how often the policy ranks chosen above rejected (sequence
  log-probability) and DPO's implicit reward accuracy and margin against the reference.
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tunixkit import _compat, data, evaluation, families, prompting, session, training

if TYPE_CHECKING:
    import grain
    import jax
    import optax
    from flax import nnx
    from tunix.sft.dpo import dpo_trainer

    from tunixkit.models import LoadedModel
    from tunixkit.tokenizer import Tokenizer

__all__ = [
    "simpo_loss_fn",
    "trainer",
    "Pair",
    "Scores",
    "dataset_pairs",
    "on_policy_pairs",
    "preference_dataset",
    "score",
    "training_pairs",
]

Pair = dict[str, str]  # {"prompt", "chosen", "rejected"}
_REJECT_ORDER = {"broken_format": 0, "no_answer": 1, "truncated": 2, "wrong_number": 3}


def on_policy_pairs(
    loaded: LoadedModel,
    records: Sequence[Mapping[str, str]],
    config: evaluation.EvalConfig,
    *,
    samples: int,
    gold_fallback: bool = True,
    verbose: bool = True,
    clock: session.Clock | None = None,
) -> list[Pair]:
    """One pair per question from ``samples`` answers sampled with ``config``: a correct,
    well-formatted one is *chosen*, a wrong, badly formatted or truncated one *rejected* (a format
    error before a wrong number: it is the unambiguous failure).

    Of several correct answers the most likely one (mean token log-probability) is chosen: at a
    high temperature a right number can sit in garbled reasoning. When no answer is correct, the
    reference solution in the reasoning format is chosen (``gold_fallback``); questions without a
    pair are counted. (Preferring the greedy answer as chosen was tried on the smoke model: held-out
    preference accuracy no better, greedy accuracy 0.47 -> 0.33.) With ``clock``
    (:meth:`tunixkit.session.Session.part`) the pass stops part-way when its time is up, and the
    questions it answered give their pairs."""
    prompts = [loaded.chat.prompt(r["question"], config.system_prompt) for r in records]
    groups = evaluation.sample_groups(
        loaded,
        prompts,
        config,
        samples=samples,
        logprobs=True,
        progress=True,
        clock=clock,
        what="on-policy pairs",
    )
    records = records[: len(groups)]
    pairs: list[Pair] = []
    all_right = all_wrong = 0
    for i, r in enumerate(records):
        group = groups[i]
        keys = [-g.mean_logprob for g in group]  # the likeliest correct answer sorts first
        cats = [evaluation.categorize(g.text, r["answer"], g.truncated) for g in group]
        # The sampler drops the stop token; put it back where the answer stopped on its own.
        texts = [g.text + ("" if g.truncated else loaded.chat.end_of_turn) for g in group]
        good = [
            t
            for _, t in sorted(
                (k, t) for k, t, c in zip(keys, texts, cats, strict=True) if c == "correct"
            )
        ]
        # The clearest failure is rejected: format errors first, a wrong number last.
        bad = [
            t
            for _, t in sorted(
                (_REJECT_ORDER[c], t) for t, c in zip(texts, cats, strict=True) if c != "correct"
            )
        ]
        if bad and (good or gold_fallback):
            chosen = (
                good[0]
                if good
                else prompting.format_completion(r["solution"], r["answer"], family=loaded.family)
            )
            pairs.append({"prompt": prompts[i], "chosen": chosen, "rejected": bad[0]})
        all_right += not bad
        all_wrong += not good
    if verbose:
        print(
            f"on-policy pairs: {len(pairs)} from {len(records)} questions x {samples} samples "
            f"({all_right} all correct: no pair; {all_wrong} all wrong"
            f"{': chosen = reference solution' if gold_fallback else ': no pair'})"
        )
    return pairs


def dataset_pairs(
    dataset: str,
    split: str = "train",
    *,
    fields: Sequence[str] = ("prompt", "chosen", "rejected"),
    name: str | None = None,
    limit: int | None = None,
    family: str = "gemma3",
) -> list[Pair]:
    """Pairs from a preference dataset; ``fields`` name its prompt, chosen and rejected columns. The
    prompt goes into ``family``'s chat template; responses get its end-of-turn piece."""
    rows = data.load_rows(dataset, split, name=name, limit=limit)
    chat = families.get(family).chat
    return [
        {"prompt": chat.prompt(p), "chosen": c + chat.end_of_turn, "rejected": r + chat.end_of_turn}
        for p, c, r in data.columns(rows, fields, source=dataset)
    ]


def training_pairs(
    out_dir: str | pathlib.Path,
    source: str,
    *,
    heldout: int,
    policy: LoadedModel | None = None,
    train_records: Sequence[Mapping[str, str]] = (),
    heldout_records: Sequence[Mapping[str, str]] = (),
    config: evaluation.EvalConfig | None = None,
    samples: int = 4,
    fields: Sequence[str] = ("prompt", "chosen", "rejected"),
    clock: session.Clock | None = None,
) -> dict[str, list[Pair]]:
    """``{"train", "heldout"}`` pairs, read from ``out_dir/pairs_*.jsonl`` when a previous run of
    this recipe wrote them, else built and written there. ``source``: ``"on-policy"`` (``policy``
    samples ``samples`` answers per record with ``config``; the held-out pairs come from
    ``heldout_records`` with the next seed), or a preference dataset (its first ``heldout`` pairs
    are held out). ``clock``: the training pass's (:func:`on_policy_pairs`); the held-out pairs,
    a few, are always made whole."""
    out = pathlib.Path(out_dir)
    files = {"train": out / "pairs_train.jsonl", "heldout": out / "pairs_heldout.jsonl"}
    if all(f.is_file() for f in files.values()):
        pairs = {k: data.read_rows(f) for k, f in files.items()}
        print(
            f"read {len(pairs['train'])} training and {len(pairs['heldout'])} held-out pairs "
            f"from {out}"
        )
        return pairs
    if source == "on-policy":
        if config is None or policy is None:
            raise ValueError("on-policy pairs need the policy and a sampling config")
        later = dataclasses.replace(config, seed=config.seed + 1)
        pairs = {
            "train": on_policy_pairs(policy, train_records, config, samples=samples, clock=clock),
            "heldout": on_policy_pairs(policy, heldout_records[:heldout], later, samples=samples),
        }
    else:
        everything = dataset_pairs(
            source, fields=fields, family=policy.family if policy is not None else "gemma3"
        )
        if len(everything) <= heldout:
            raise data.DataError(
                f"{source}: {len(everything)} preference pairs, and the recipe holds out the first "
                f"{heldout} to score the model on pairs it never trained on: none would be left to "
                f"train on; use a data set with more than {heldout} pairs "
                "(or lower heldout_questions)"
            )
        pairs = {"train": everything[heldout:], "heldout": everything[:heldout]}
        print(f"{source}: {len(pairs['train'])} training pairs, the first {heldout} held out")
    for k, f in files.items():
        data.write_jsonl(pairs[k], f)
    return pairs


def tokenize(
    pairs: Sequence[Pair], tokenizer: Tokenizer, *, max_prompt_length: int, max_response_length: int
) -> list[dict[str, np.ndarray]]:
    """``DPOTrainer``'s tokenized fields per pair: ``[BOS] prompt`` left-padded (long prompts keep
    their end), each response right-padded. Truncated pairs are counted and reported."""
    pad = tokenizer.pad_id()
    out, cut = [], 0
    for pair in pairs:
        full = tokenizer.with_bos(tokenizer.encode(pair["prompt"]))
        prompt = full[-max_prompt_length:]
        item = {
            "prompt_ids": np.array([pad] * (max_prompt_length - len(prompt)) + prompt, np.int32)
        }
        cut += len(full) > max_prompt_length
        for key in ("chosen", "rejected"):
            ids = tokenizer.encode(pair[key])
            cut += len(ids) > max_response_length
            ids = ids[:max_response_length]
            item[f"{key}_ids"] = np.array(ids + [pad] * (max_response_length - len(ids)), np.int32)
        out.append(
            item
            | {
                k.replace("_ids", "_mask"): (v != pad).astype(np.int32)
                for k, v in list(item.items())
            }
        )
    if cut:
        print(
            f"preferences.tokenize: {cut} prompts/responses longer than the limits were truncated"
        )
    return out


def preference_dataset(
    pairs: Sequence[Pair],
    tokenizer: Tokenizer,
    *,
    batch_size: int,
    num_batches: int | None = None,
    max_prompt_length: int,
    max_response_length: int,
    seed: int = 0,
) -> grain.MapDataset[dict[str, np.ndarray]]:
    """A reproducible grain dataset of tokenized DPO batches (shuffled and repeated to
    ``num_batches`` when given; resume relies on the fixed order)."""
    import grain

    items = tokenize(
        pairs,
        tokenizer,
        max_prompt_length=max_prompt_length,
        max_response_length=max_response_length,
    )
    ds = grain.MapDataset.source(items)
    if num_batches is not None:
        ds = ds.shuffle(seed=seed).repeat(-(-num_batches * batch_size // max(len(items), 1)))
    ds = ds.batch(batch_size, drop_remainder=num_batches is not None)
    return ds[:num_batches] if num_batches is not None else ds


@dataclasses.dataclass(frozen=True)
class Scores:
    """Held-out preference figures (see :func:`score`)."""

    reward_accuracy: float  # DPO implicit reward of chosen > rejected, ties half (0.5 at step 0)
    likelihood_ranking: float  # share of pairs where the policy's log p(chosen) > log p(rejected)
    margin: float  # mean implicit reward margin, beta * (policy - reference) log-ratio difference
    n: int


def sequence_logps(model: nnx.Module, batch: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Summed log-probabilities of the chosen and rejected responses of a tokenized batch, computed
    exactly as ``DPOTrainer`` computes them for training."""
    import jax.numpy as jnp
    from flax import nnx
    from tunix.rl import common
    from tunix.sft.dpo import dpo_trainer

    prompt = jnp.concatenate([batch["prompt_ids"]] * 2)
    prompt_mask = jnp.concatenate([batch["prompt_mask"]] * 2)
    completion = jnp.concatenate([batch["chosen_ids"], batch["rejected_ids"]])
    completion_mask = jnp.concatenate([batch["chosen_mask"], batch["rejected_mask"]])
    ids, mask = (
        jnp.concatenate([prompt, completion], 1),
        jnp.concatenate([prompt_mask, completion_mask], 1),
    )
    # each device scores its own rows (unplaced, every device would compute the whole batch)
    ids, mask, completion_mask = _compat.split_rows(
        (ids, mask, completion_mask), _compat.mesh_of(nnx.state(model))
    )
    # Gemma3 builds its own mask; Gemma2 has no get_attention_mask (tunix's DPO trainer then uses
    # a causal mask, as here)
    attn = (
        model.get_attention_mask(ids, inputs_mask=mask)
        if hasattr(model, "get_attention_mask")
        else common.make_causal_attn_mask(mask)
    )
    chosen, rejected = dpo_trainer.compute_logps(
        model,
        ids,
        common.build_positions_from_mask(mask),
        attn,
        completion.shape[1],
        completion_mask,
    )
    return np.asarray(chosen), np.asarray(rejected)


def score(
    policy: nnx.Module,
    reference: nnx.Module,
    batches: Iterable[Mapping[str, np.ndarray]],
    *,
    beta: float,
) -> Scores:
    """:class:`Scores` of ``policy`` against ``reference`` over tokenized ``batches``. Each batch's
    seconds go to the session's rehearsal, which tells the first batch's compile from the pace."""
    rows = []
    timings = session.pass_batches()
    for batch in batches:
        t0 = time.perf_counter()
        pc, pr = sequence_logps(policy, batch)
        rc, rr = sequence_logps(reference, batch)
        rows.append(np.stack([pc, pr, rc, rr], 1))  # (numpy: waits for the device)
        timings.append((len(pc), time.perf_counter() - t0))
    pc, pr, rc, rr = np.concatenate(rows).T
    margin = beta * ((pc - rc) - (pr - rr))
    tie = np.abs(margin) < 1e-6  # at step 0 the policy is the reference: all ties
    wins = np.mean(~tie & (margin > 0)) + 0.5 * np.mean(tie)
    return Scores(float(wins), float(np.mean(pc > pr)), float(np.mean(margin)), len(pc))


def simpo_loss_fn(
    model: nnx.Module,
    train_example: dpo_trainer.TrainExample,
    beta: float = 2.0,
    gamma: float = 0.5,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """SimPO (Meng et al. 2024) as a tunix DPO-trainer loss: no reference model; the margin is
    between length-normalised log-probabilities,
    ``-log sigmoid(beta * (lp_c/|c| - lp_r/|r|) - gamma)``."""
    import jax
    import jax.numpy as jnp
    from tunix.sft.dpo import dpo_trainer

    chosen, rejected = dpo_trainer.compute_logps(
        model,
        train_example.input_ids,
        train_example.positions,
        train_example.attention_mask,
        train_example.logits_to_keep,
        train_example.completion_mask,
    )
    half = train_example.completion_mask.shape[0] // 2
    lengths = jnp.maximum(train_example.completion_mask.sum(-1), 1.0)
    c, r = beta * chosen / lengths[:half], beta * rejected / lengths[half:]
    losses = -jax.nn.log_sigmoid(c - r - gamma)
    aux = {
        "rewards/chosen": c.mean(),
        "rewards/rejected": r.mean(),
        "rewards/margin": (c - r).mean(),
        "rewards/accuracy": (c > r).mean(),
        "log_probs/chosen": chosen.mean(),
        "log_probs/rejected": rejected.mean(),
    }
    return losses.mean(), aux


class _Settings(Protocol):
    """What :func:`trainer` reads of a preference run's settings (03's ``recipes.DPO``, 06's
    ``pipeline.StageSettings``)."""

    algorithm: str
    beta: float
    lambda_orpo: float
    simpo_gamma: float
    learning_rate: float
    clip_norm: float | None
    steps: int
    eval_every: int
    checkpoint_every: int


def trainer(
    settings: _Settings,
    actor: nnx.Module,
    reference: nnx.Module | None,
    *,
    output_dir: str | pathlib.Path | None = None,
    schedule_steps: int | None = None,
    description: str | None = None,
    wrap_optimizer: Callable[[optax.GradientTransformation], Any] | None = None,
) -> dpo_trainer.DPOTrainer:
    """tunix's ``DPOTrainer`` for ``settings.algorithm``: "dpo" (with ``reference``), "orpo", or
    "simpo" (:func:`simpo_loss_fn`, reference-free; ``beta`` is SimPO's beta, ``simpo_gamma`` its
    margin), fed the batches of :func:`preference_dataset`, with its config and optimizer
    (:func:`tunixkit.training.optimizer` over ``schedule_steps``, default ``settings.steps``) made
    here from ``settings``. ``output_dir``: checkpoints (resumed) and logs there
    (:func:`tunixkit.training.trainer_config`); None, neither (the memory plan). ``wrap_optimizer``:
    applied to the optimizer before the trainer makes its state (the memory plan's abstract one).
    The one preference builder: notebooks 03 and 06 and the memory plan build theirs here."""
    from tunix.sft.dpo import dpo_trainer

    algorithm = settings.algorithm
    if algorithm not in ("dpo", "orpo", "simpo"):
        raise ValueError(f"unknown preference algorithm {algorithm!r}; known: dpo, orpo, simpo")
    if algorithm == "dpo" and reference is None:
        raise ValueError("DPO needs the reference model (ORPO and SimPO go without one)")
    config = training.trainer_config(
        output_dir,
        max_steps=settings.steps,
        eval_every=settings.eval_every,
        checkpoint_every=settings.checkpoint_every,
        description=description or algorithm.upper(),
        config_cls=dpo_trainer.DPOTrainingConfig,
        # tunix reads the config's algorithm: SimPO runs its ORPO path (no reference pass)
        algorithm="dpo" if algorithm == "dpo" else "orpo",
        beta=settings.beta,
        lambda_orpo=settings.lambda_orpo,
    )
    steps = schedule_steps or settings.steps
    tx = training.optimizer(settings.learning_rate, steps, clip_norm=settings.clip_norm)
    optimizer = wrap_optimizer(tx) if wrap_optimizer else tx
    kept = reference if algorithm == "dpo" else None
    trainer = dpo_trainer.DPOTrainer(actor, kept, optimizer, config)
    if algorithm == "simpo":
        _compat.without_aux_metric(trainer, "odds_ratio")  # an ORPO figure SimPO does not have
        trainer.with_loss_fn(simpo_loss_fn, has_aux=True)
        gamma = settings.simpo_gamma
        trainer.with_gen_model_input_fn(
            lambda x: {"train_example": x, "beta": config.beta, "gamma": gamma}
        )
    return trainer
