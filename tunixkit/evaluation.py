"""Batched greedy generation and a trustworthy GSM8K evaluator.

- :func:`generate`: prompts -> completions with tunix's ``Sampler``, batched with prompts sorted by
  length, a fixed prompt length (one compilation), stopping at EOS *and* ``<end_of_turn>``.
- :func:`evaluate`: accuracy with a 95% Wilson interval, partial accuracy (answer found anywhere),
  format compliance, mean generated tokens, error categories; predictions saved as JSONL.
- :func:`comparison_table` / :func:`plot_comparison`: several models or checkpoints side by side.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import pathlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np
from flax import nnx
from tqdm.auto import tqdm

from tunixkit import _compat, families, hosts, runlog, session, stats
from tunixkit.answers import extract_answer, is_correct, latex_answer, latex_correct
from tunixkit.prompting import MATH_SYSTEM_PROMPT
from tunixkit.rewards import has_format

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from tunix.generate.sampler import Sampler

    from tunixkit.models import LoadedModel
    from tunixkit.runtime import Runtime

__all__ = [
    "Bar",
    "Checks",
    "ChoiceScorer",
    "EvalConfig",
    "EvalResult",
    "Generation",
    "Paired",
    "comparison_table",
    "evaluate",
    "generate",
    "group_table",
    "make_sampler",
    "paired",
    "plot_comparison",
    "prompt_fitter",
    "side_by_side",
    "worst_errors",
]


def count_cut(
    where: str,
    lengths: Sequence[int],
    limit: int,
    *,
    how: str = "are left-truncated",
    clock: session.Session | None = None,
) -> int:
    """Print how many of the prompts of ``lengths`` tokens are over ``limit``, and count them with
    the prompts seen in ``clock.prompts_cut``, or else in the session's timed block the pass runs
    in (:func:`tunixkit.session.record_cut`).

    >>> count_cut("doctest", [10, 300, 12], 256)
    doctest: 1/3 prompts exceed max_prompt_length=256 tokens and are left-truncated
    1
    """
    cut = sum(n > limit for n in lengths)
    session.record_cut(where, cut, len(lengths), None if clock is None else clock.prompts_cut)
    if cut:
        print(
            f"{where}: {cut}/{len(lengths)} prompts exceed max_prompt_length={limit} tokens "
            f"and {how}"
        )
    return cut


CATEGORIES = ("correct", "wrong_number", "broken_format", "no_answer", "truncated")

_OPS: dict[str, Callable[[float, float], bool]] = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}


@dataclasses.dataclass(frozen=True)
class Bar:
    """One check of a notebook's last cell: a figure the run measured against a bar.

    A *learning* bar says the workflow learned: it must fail when training is switched off (the
    no-learning control, ``scripts/no_learning.py``, whose recorded figures a test feeds to every
    recipe's bars). A *guard* (``guard=True``) protects what training must not break (the format,
    greedy accuracy) and may pass untrained.

    A figure the run did not measure (a stage that was skipped) does not meet its bar.

    >>> bar = Bar("format_after", ">=", 0.9, "format after training")
    >>> bar.met({"format_after": 0.95}), bar.describe({"format_after": 0.85})
    (True, 'format after training: format_after 0.850 >= 0.9 NOT MET')
    >>> bar.met({}), bar.describe({})
    (False, 'format after training: format_after not measured in this run (bar >= 0.9) NOT MET')
    """

    figure: str  # a key of the run's figures
    op: str  # ">", ">=", "<" or "<="
    bar: float
    says: str  # what it means, in words
    guard: bool = False

    def __post_init__(self) -> None:
        if self.op not in _OPS:
            raise ValueError(f"Bar {self.figure!r}: op {self.op!r} is not one of {list(_OPS)}")

    def met(self, figures: Mapping[str, float]) -> bool:
        return self.figure in figures and _OPS[self.op](float(figures[self.figure]), self.bar)

    def describe(self, figures: Mapping[str, float]) -> str:
        verdict = "met" if self.met(figures) else "NOT MET"
        if self.figure not in figures:
            return (
                f"{self.says}: {self.figure} not measured in this run "
                f"(bar {self.op} {self.bar:g}) {verdict}"
            )
        value = float(figures[self.figure])
        return f"{self.says}: {self.figure} {value:.3f} {self.op} {self.bar:g} {verdict}"


class Checks:
    """A notebook's last cell. :meth:`must` asserts what holds whatever the run (the session ended
    as it should, the export loads); :meth:`should` is for what a run should show (it learned):
    asserted where ``enforce`` (a whole smoke run of the preset, whose bars were measured), else
    printed as a warning with its numbers: a noisy gain must not end a 9-hour run in an error.

    >>> checks = Checks(enforce=False)
    >>> checks.should(0.1 > 0.2, "reward rose 0.1 -> 0.2")
    WARNING (not enforced in this run): reward rose 0.1 -> 0.2
    >>> checks.done("GRPO")
    GRPO: must-hold checks passed; 1 of 1 learning checks not met (see the warnings above)
    >>> Checks(enforce=True).should(False, "no gain")
    Traceback (most recent call last):
    ...
    AssertionError: no gain
    """

    def __init__(self, *, enforce: bool) -> None:
        self.enforce = enforce
        self.warnings: list[str] = []
        self.asked = 0

    @classmethod
    def for_run(cls, rt: Runtime, recipe: Any, *, rehearsal: bool = False) -> Checks:
        """A notebook's checks: learning is asserted for the run whose bars were measured, the smoke
        preset as it is (no knob set); a run with other settings (fewer steps, other data sizes),
        a rehearsal or the full profile warns with its numbers instead.

        >>> from tunixkit import recipes, runtime
        >>> smoke = runtime.resolve("smoke", verbose=False)
        >>> Checks.for_run(smoke, recipes.SFT.smoke()).enforce
        True
        >>> fewer = dataclasses.replace(recipes.SFT.smoke(), steps=10)
        >>> (Checks.for_run(smoke, fewer).enforce,
        ...  Checks.for_run(smoke, recipes.SFT.smoke(), rehearsal=True).enforce)
        (False, False)
        """
        return cls(enforce=rt.smoke and not rehearsal and recipe == type(recipe).smoke())

    def must(self, condition: bool, message: Any) -> None:
        if not condition:
            raise AssertionError(message)

    def should(self, condition: bool, message: Any) -> None:
        self.asked += 1
        if condition:
            return
        if self.enforce:
            raise AssertionError(message)
        self.warnings.append(str(message))
        print(f"WARNING (not enforced in this run): {message}")

    def bars(
        self,
        bars: Sequence[Bar],
        figures: Mapping[str, float],
        path: str | pathlib.Path | None = None,
    ) -> None:
        """Check each bar on the run's ``figures`` (learning bars and guards alike through
        :meth:`should`), after writing the figures, the bars and what each gave to ``path`` (a
        run's ``checks.json``: what the no-learning control records).

        >>> Checks(enforce=False).bars([Bar("gain", ">", 0.1, "reward rose")], {"gain": 0.3})
        reward rose: gain 0.300 > 0.1 met
        """
        figures = {k: float(v) for k, v in figures.items()}
        rows = [
            {**dataclasses.asdict(b), "value": figures.get(b.figure), "met": b.met(figures)}
            for b in bars
        ]
        if path is not None:
            record = {"enforced": self.enforce, "figures": figures, "bars": rows}
            text = json.dumps(record, indent=2) + "\n"
            hosts.once(f"write {path}", pathlib.Path(path).write_text, text)
        for row, b in zip(rows, bars, strict=True):
            if row["met"]:
                print(b.describe(figures))
            self.should(row["met"], b.describe(figures))

    def done(self, label: str) -> None:
        if self.warnings:
            print(
                f"{label}: must-hold checks passed; {len(self.warnings)} of {self.asked} learning "
                "checks not met (see the warnings above)"
            )
        else:
            print(f"{label} OK")


@dataclasses.dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """How completions are generated for evaluation (greedy by default)."""

    max_prompt_length: int = 256  # prompt tokens; longer prompts are counted and left-truncated
    max_generation_steps: int = 768  # new tokens at most
    batch_size: int = 32  # prompts per sampler call
    temperature: float = 0.0  # 0 = greedy
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 42
    system_prompt: str | None = MATH_SYSTEM_PROMPT

    @classmethod
    def smoke(cls) -> EvalConfig:
        return cls(max_prompt_length=96, max_generation_steps=64, batch_size=32)

    @classmethod
    def full(cls) -> EvalConfig:
        return cls()


@dataclasses.dataclass(frozen=True)
class Generation:
    text: str
    num_tokens: int
    truncated: bool  # hit max_generation_steps without a stop token
    mean_logprob: float | None = (
        None  # per generated token, at the sampling temperature (logprobs=True)
    )


def make_sampler(loaded: LoadedModel, cache_size: int) -> Sampler:
    """A tunix ``Sampler`` for a :class:`tunixkit.models.LoadedModel`, each batch split over the
    model's mesh (``_compat.BatchShardedSampler``: tunix's own computes every row on every device
    outside a ``with mesh:``)."""
    from tunix.generate import sampler as sampler_lib

    cfg = loaded.config
    cache = sampler_lib.CacheConfig(
        cache_size=cache_size,
        num_layers=cfg.num_layers,
        num_kv_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
    )
    return _compat.BatchShardedSampler(
        transformer=loaded.model, tokenizer=loaded.tokenizer, cache_config=cache
    )


def generate(
    loaded: LoadedModel,
    prompts: Sequence[str],
    config: EvalConfig = EvalConfig(),
    *,
    progress: bool = True,
    sampler: Sampler | None = None,
    logprobs: bool = False,
) -> list[Generation]:
    """Complete each (already formatted) prompt; results come back in the input order. With
    ``logprobs``, each :class:`Generation` carries its mean token log-probability."""
    cache_size = config.max_prompt_length + config.max_generation_steps
    sampler = sampler or make_sampler(loaded, cache_size)
    encode = sampler.tokenize
    lengths = [len(encode(p)) for p in prompts]
    count_cut("generate", lengths, config.max_prompt_length, how=CUT_HOW)
    order = sorted(range(len(prompts)), key=lambda i: lengths[i])
    results: dict[int, Generation] = {}
    bs = min(config.batch_size, len(prompts)) or 1
    top_k = None if config.top_k is None else min(config.top_k, families.vocab_size(loaded.config))
    # tunix samples only when top_p is given; with top_p=None a temperature is silently ignored.
    top_p = config.top_p if config.top_p is not None or not config.temperature else 1.0
    ways = getattr(sampler, "ways", 1)
    timings = session.pass_batches()  # the rehearsal's compile/pace split
    for start in tqdm(
        range(0, len(order), bs), desc="generating", unit="batch", disable=not progress
    ):
        t0 = time.perf_counter()
        idx = order[start : start + bs]
        batch = [_clip(prompts[i], encode, loaded.tokenizer, config.max_prompt_length) for i in idx]
        # Pad a short last batch only to the next power of two (a few shapes to compile, and
        # little wasted work: padding 8 prompts to 32 made small evaluations 4x slower), but to at
        # least the devices it splits over, so each computes its own rows.
        batch += [batch[-1]] * (
            min(config.batch_size, max(_next_pow2(len(batch)), ways)) - len(batch)
        )
        out = sampler(
            batch,
            max_generation_steps=config.max_generation_steps,
            max_prompt_length=config.max_prompt_length,
            eos_tokens=loaded.eos_ids,
            temperature=config.temperature,
            top_k=top_k,
            top_p=top_p,
            seed=config.seed,
            echo=False,
            return_logprobs=logprobs,
        )
        for j, i in enumerate(idx):
            n = len(out.tokens[j])
            mean_lp = float(sum(out.logprobs[j]) / max(n, 1)) if logprobs else None
            results[i] = Generation(out.text[j], n, n >= config.max_generation_steps, mean_lp)
        timings.append((len(idx), time.perf_counter() - t0))
    return [results[i] for i in range(len(prompts))]


class ChoiceScorer:
    """The probability of each of ``choices`` (texts, one token each after a prompt) as the next
    token after each prompt, from one forward pass of ``loaded``'s model per batch: a judge's
    score digits, read as probabilities rather than one greedy token. Only the last position is
    projected onto the vocabulary (:func:`tunixkit._compat.choice_logprobs`), and the pass is
    compiled once per batch shape: ``batch_size`` rows (a short last batch padded to a power of
    two), prompts left-padded to a power of two of at least 64 tokens, up to
    ``max_prompt_length``; a longer prompt keeps its end (counted and printed, as
    :func:`count_cut` does). Each batch's seconds go to the session's rehearsal."""

    def __init__(
        self,
        loaded: LoadedModel,
        choices: Sequence[str],
        *,
        max_prompt_length: int,
        batch_size: int = 16,
    ) -> None:
        self.loaded, self.choices = loaded, list(choices)
        self.max_prompt_length, self.batch_size = max_prompt_length, batch_size
        self.fn = _compat.choice_logprobs(loaded.model)
        self.choice_ids: list[int] | None = None

    def _resolve(self, prompt: str) -> list[int]:
        encode = self.loaded.tokenizer.encode
        base, ids = encode(prompt), []
        for choice in self.choices:
            full = encode(prompt + choice)
            if full[: len(base)] != base or len(full) != len(base) + 1:
                raise ValueError(
                    f"ChoiceScorer: {choice!r} after a prompt is not one token of its own (it "
                    f"encodes as {full[len(base) - 1 :]} after the prompt's last token "
                    f"{base[-1:]}): each choice must add exactly one token to the prompt"
                )
            ids.append(full[-1])
        return ids

    def __call__(self, prompts: Sequence[str]) -> np.ndarray:
        """``[len(prompts), len(choices)]`` probabilities (over the whole vocabulary: a row sums
        to the mass the model puts on the choices)."""
        if not prompts:
            return np.zeros((0, len(self.choices)))
        tok = self.loaded.tokenizer
        if self.choice_ids is None:
            self.choice_ids = self._resolve(prompts[0])
        rows = [tok.with_bos(tok.encode(p)) for p in prompts]
        limit = self.max_prompt_length
        count_cut("score", [len(r) for r in rows], limit, how="keep their end")
        rows = [r[-limit:] for r in rows]
        state = nnx.state(self.loaded.model)
        mesh = _compat.mesh_of(state)
        ways = _compat.data_ways(mesh)
        choices = jnp.asarray(self.choice_ids, dtype=jnp.int32)
        out = []
        timings = session.pass_batches()
        for start in range(0, len(rows), self.batch_size):
            t0 = time.perf_counter()
            batch = rows[start : start + self.batch_size]
            n = len(batch)
            size = min(self.batch_size, max(_next_pow2(n), ways))
            width = min(limit, max(64, _next_pow2(max(map(len, batch)))))
            ids = np.full((size, width), tok.pad_id(), np.int32)
            mask = np.zeros((size, width), bool)
            for i, r in enumerate(batch + [batch[-1]] * (size - n)):
                ids[i, width - len(r) :], mask[i, width - len(r) :] = r, True
            ids_j, mask_j = _compat.split_rows((jnp.asarray(ids), jnp.asarray(mask)), mesh)
            out.append(np.exp(np.asarray(self.fn(state, ids_j, mask_j, choices))[:n]))
            timings.append((n, time.perf_counter() - t0))
        return np.concatenate(out)


def _next_pow2(n: int) -> int:
    """The smallest power of two >= n.

    >>> [_next_pow2(n) for n in (1, 2, 3, 8, 9)]
    [1, 2, 4, 8, 16]
    """
    return 1 << (n - 1).bit_length()


CUT_MARK = " [...] "
CUT_HOW = f"are cut in their middle (start and end kept, {CUT_MARK.strip()!r} marks the cut)"


def _clip(prompt: str, encode, tokenizer, max_len: int) -> str:
    """``prompt`` cut to ``max_len`` tokens in its middle: its start (the system prompt and the
    instruction) and its end (the question's last words and the model's turn) are kept, and
    :data:`CUT_MARK` shows where text was left out."""
    ids = list(encode(prompt))
    if len(ids) <= max_len:
        return prompt
    bos = 1 if tokenizer.bos_id() and ids[0] == tokenizer.bos_id() else 0
    room = max_len - bos - 8  # the mark's tokens, and a margin for tokens merging at the joins
    head = room // 3
    return (
        tokenizer.decode(ids[bos : bos + head])
        + CUT_MARK
        + tokenizer.decode(ids[len(ids) - (room - head) :])
    )


def prompt_fitter(tokenizer: Any, max_len: int) -> Callable[[str], str]:
    """A function that cuts a formatted prompt to ``max_len`` tokens (BOS included) in its middle,
    as :func:`generate` does: for the prompts GRPO's rollouts sample from. tunix's sampler does not
    cut them: a longer prompt raises its prompt length to the next power of two, past the KV cache
    the rollout was built with (``ValueError: Total sampling steps ... must be less than the cache
    size``), hours into a session."""

    def encode(prompt: str) -> list[int]:
        return tokenizer.with_bos(tokenizer.encode(prompt))

    return lambda prompt: _clip(prompt, encode, tokenizer, max_len)


def sample_groups(
    loaded: LoadedModel,
    prompts: Sequence[str],
    config: EvalConfig,
    *,
    samples: int,
    logprobs: bool = False,
    progress: bool = False,
    sampler: Sampler | None = None,
    clock: session.Clock | None = None,
    what: str = "pass",
) -> list[list[Generation]]:
    """``samples`` answers to each (formatted) prompt in one batched :func:`generate`, grouped: the
    i-th group answers ``prompts[i]``. Every pass that samples several answers per prompt and then
    ranks or averages them starts here: 03's on-policy pairs, 06's sampled evaluations, its
    self-improvement and judged pairs (:func:`tunixkit.pipeline.sample_and_judge`). A pass that
    calls it chunk by chunk passes one ``sampler`` (:func:`make_sampler`), which compiles once.

    With ``clock`` (a :class:`tunixkit.session.Clock`, e.g.
    :meth:`tunixkit.session.Session.part`) it goes a few generation batches at a time with one
    sampler, and stops before a chunk that would not end in time: fewer groups than prompts come
    back (the first ones), and it says how far it got, naming the pass (``what``). A clock without
    a limit changes nothing: one call, as without one."""
    if clock is None or clock.remaining() == float("inf"):
        flat = generate(
            loaded,
            [p for p in prompts for _ in range(samples)],
            config,
            logprobs=logprobs,
            progress=progress,
            sampler=sampler,
        )
        return [flat[i * samples : (i + 1) * samples] for i in range(len(prompts))]
    chunk = max(1, 4 * config.batch_size // samples)
    if sampler is None:
        sampler = make_sampler(loaded, config.max_prompt_length + config.max_generation_steps)
    groups: list[list[Generation]] = []
    started = time.time()
    chunks = range(0, len(prompts), chunk)
    for i in tqdm(chunks, desc=what, unit="chunk", disable=not progress):
        if i and clock.must_stop((time.time() - started) / (i // chunk)):
            print(
                f"{what}: the session clock stopped the pass after {i} of {len(prompts)} prompts "
                "(what they gave is kept)"
            )
            break
        groups += sample_groups(
            loaded,
            prompts[i : i + chunk],
            config,
            samples=samples,
            logprobs=logprobs,
            sampler=sampler,
        )
    return groups


def categorize(text: str, gold: str, truncated: bool, *, latex: bool = False) -> str:
    """One of :data:`CATEGORIES` for a completion; ``latex``: a MATH-style answer, read by
    :func:`tunixkit.answers.latex_answer` and checked by math-verify (``wrong_number``: a wrong
    answer).

    >>> categorize("<reasoning>r</reasoning><answer>4</answer>", "4", False)
    'correct'
    >>> categorize("it is 4", "4", False), categorize("<reasoning>r", "4", True)
    ('broken_format', 'truncated')
    >>> categorize("<reasoning>r</reasoning><answer>4 or 5</answer>", "4", False)  # a hedge
    'wrong_number'
    """
    right = latex_correct(text, gold, strict=True) if latex else is_correct(text, gold, strict=True)
    if right and has_format(text):
        return "correct"
    if truncated:
        return "truncated"
    found = latex_answer(text) if latex else extract_answer(text)
    if (found.text if latex else found.value) is None and not found.hedge:
        return "no_answer"
    if not has_format(text):
        return "broken_format"
    return "wrong_number"


@dataclasses.dataclass
class EvalResult:
    """Headline metrics of one model on one set of questions, plus every prediction."""

    name: str
    n: int
    accuracy: float
    ci_low: float
    ci_high: float
    partial_accuracy: float
    format_rate: float
    mean_tokens: float
    categories: dict[str, int]
    predictions: list[dict[str, Any]]

    def summary(self) -> dict[str, Any]:
        keys = (
            "accuracy",
            "ci_low",
            "ci_high",
            "partial_accuracy",
            "format_rate",
            "mean_tokens",
            "n",
        )
        return {k: getattr(self, k) for k in keys} | {"categories": dict(self.categories)}

    def first(self, n: int) -> EvalResult:
        """The same metrics on the first ``n`` questions only (to compare with a shrunk
        evaluation)."""
        return self if n >= self.n else result_from(self.name, self.predictions[:n])


def evaluate(
    loaded: LoadedModel,
    records: Sequence[Mapping[str, str]],
    *,
    name: str,
    config: EvalConfig = EvalConfig(),
    output_dir: str | pathlib.Path | None = None,
    progress: bool = True,
    sampler: Sampler | None = None,
    reuse: bool = False,
    latex: bool = False,
) -> EvalResult:
    """Generate for every record and score it; writes ``<output_dir>/predictions_<name>.jsonl``.
    ``latex``: the answers are MATH-style LaTeX (:func:`tunixkit.data.load_math`), checked by
    math-verify; a record's ``subject`` and ``level`` are kept with its prediction.

    ``accuracy`` counts a completion only with the exact format and the right number in
    ``<answer>``; ``partial_accuracy`` accepts the right number found anywhere (``####``,
    "the answer is", last number). With ``reuse``, predictions already stored for exactly these
    questions are read back instead of generated again (a resumed run's "before" evaluation).
    """
    stored = (
        pathlib.Path(output_dir) / f"predictions_{name}.jsonl" if output_dir is not None else None
    )
    if reuse and stored is not None and stored.is_file():
        preds = [
            json.loads(line) for line in stored.read_text(encoding="utf-8").splitlines() if line
        ]
        if [p["question"] for p in preds] == [r["question"] for r in records]:
            print(f"{name}: reusing the {len(preds)} stored predictions in {stored}")
            return result_from(name, preds)
    prompts = [loaded.chat.prompt(r["question"], config.system_prompt) for r in records]
    gens = generate(loaded, prompts, config, progress=progress, sampler=sampler)
    preds = []
    for r, g in zip(records, gens, strict=True):
        cat = categorize(g.text, r["answer"], g.truncated, latex=latex)
        preds.append(
            {
                "question": r["question"],
                "gold": r["answer"],
                "completion": g.text,
                "extracted": latex_answer(g.text).text if latex else extract_answer(g.text).value,
                "category": cat,
                "partial": latex_correct(g.text, r["answer"])
                if latex
                else is_correct(g.text, r["answer"]),
                "format": has_format(g.text),
                "num_tokens": g.num_tokens,
            }
            | {k: r[k] for k in ("subject", "level") if k in r}
        )
    if stored is not None:  # every process sampled every prediction: process 0 writes them
        text = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in preds)
        stored.parent.mkdir(parents=True, exist_ok=True)
        hosts.once(f"write {stored}", stored.write_text, text, encoding="utf-8")
    return result_from(name, preds)


def result_from(name: str, preds: Sequence[dict[str, Any]]) -> EvalResult:
    """The :class:`EvalResult` of scored predictions (as :func:`evaluate` stores them)."""
    n = len(preds)
    k = sum(p["category"] == "correct" for p in preds)
    lo, hi = stats.wilson_interval(k, n)
    return EvalResult(
        name=name,
        n=n,
        accuracy=k / max(n, 1),
        ci_low=lo,
        ci_high=hi,
        partial_accuracy=sum(p["partial"] for p in preds) / max(n, 1),
        format_rate=sum(p["format"] for p in preds) / max(n, 1),
        mean_tokens=sum(p["num_tokens"] for p in preds) / max(n, 1),
        categories={c: sum(p["category"] == c for p in preds) for c in CATEGORIES},
        predictions=list(preds),
    )


def group_table(results: Sequence[EvalResult], key: str) -> str:
    """Accuracy (95% Wilson interval) per value of the predictions' ``key`` (MATH's ``subject`` or
    ``level``), one column per model; "" when no prediction has the key.

    >>> row = {"category": "correct", "partial": True, "format": True, "num_tokens": 5}
    >>> preds = [dict(row, level=1), dict(row, level=2, category="wrong_number")]
    >>> print(group_table([result_from("m", preds)], "level"))
    | level | m |
    |---|---|
    | 1 | 1.00 (0.21-1.00), n=1 |
    | 2 | 0.00 (0.00-0.79), n=1 |
    """
    values = sorted(
        {p[key] for r in results for p in r.predictions if p.get(key) is not None}, key=str
    )
    if not values:
        return ""
    out = [f"| {key} | " + " | ".join(r.name for r in results) + " |"]
    out.append("|---|" + "---|" * len(results))
    for v in values:
        cells = []
        for r in results:
            rows = [p for p in r.predictions if p.get(key) == v]
            k = sum(p["category"] == "correct" for p in rows)
            lo, hi = stats.wilson_interval(k, len(rows))
            cells.append(f"{k / max(1, len(rows)):.2f} ({lo:.2f}-{hi:.2f}), n={len(rows)}")
        out.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(out)


@dataclasses.dataclass(frozen=True)
class Paired:
    """Two evaluations on the same questions: which questions each got right, and whether the
    difference could be chance (McNemar's exact test on the questions where they disagree)."""

    a: str
    b: str
    only_a: int  # questions only ``a`` got right
    only_b: int  # questions only ``b`` got right
    difference: float  # accuracy of b minus accuracy of a
    p_value: float  # two-sided; small means the difference is unlikely to be chance


def paired(a: EvalResult, b: EvalResult) -> Paired:
    """Compare ``a`` and ``b`` question by question (they must cover the same questions).

    >>> right = {"question": "q", "category": "correct", "partial": True, "format": True,
    ...          "num_tokens": 9}
    >>> wrong = dict(right, category="wrong_number", partial=False)
    >>> x, y = result_from("x", [wrong] * 10), result_from("y", [right] * 10)
    >>> r = paired(x, y)
    >>> (r.only_a, r.only_b, r.difference, round(r.p_value, 4))
    (0, 10, 1.0, 0.002)
    """
    if [p["question"] for p in a.predictions] != [p["question"] for p in b.predictions]:
        raise ValueError(f"{a.name} and {b.name} were not evaluated on the same questions")
    ok_a = [p["category"] == "correct" for p in a.predictions]
    ok_b = [p["category"] == "correct" for p in b.predictions]
    only_a = sum(x and not y for x, y in zip(ok_a, ok_b, strict=True))
    only_b = sum(y and not x for x, y in zip(ok_a, ok_b, strict=True))
    p_value = stats.mcnemar_p(only_a, only_b)
    return Paired(a.name, b.name, only_a, only_b, b.accuracy - a.accuracy, p_value)


def comparison_table(results: Sequence[EvalResult]) -> str:
    """A Markdown table of the headline metrics, one row per result."""
    head = (
        "| model | n | accuracy (95% CI) | partial | format | mean tokens | "
        + " | ".join(CATEGORIES[1:])
        + " |"
    )
    rows = [head, "|" + "---|" * (6 + len(CATEGORIES) - 1)]
    for r in results:
        cats = " | ".join(str(r.categories[c]) for c in CATEGORIES[1:])
        rows.append(
            f"| {r.name} | {r.n} | {r.accuracy:.3f} ({r.ci_low:.3f}-{r.ci_high:.3f}) | "
            f"{r.partial_accuracy:.3f} | {r.format_rate:.3f} | {r.mean_tokens:.1f} | {cats} |"
        )
    return "\n".join(rows)


def worst_errors(result: EvalResult, k: int = 5) -> list[dict[str, Any]]:
    """Up to ``k`` wrong predictions, one per error category in turn (most informative first)."""
    by_cat = collections.defaultdict(list)
    for p in result.predictions:
        if p["category"] != "correct":
            by_cat[p["category"]].append(p)
    out: list[dict[str, Any]] = []
    while len(out) < k and any(by_cat.values()):
        for c in CATEGORIES[1:]:
            if by_cat[c] and len(out) < k:
                out.append(by_cat[c].pop(0))
    return out


def side_by_side(results: Sequence[EvalResult], k: int = 3) -> str:
    """A Markdown table of the first ``k`` questions: the gold answer and each result's
    completion."""

    def cell(text: str, limit: int = 300) -> str:
        if not text.strip():
            return f"*(only whitespace, {len(text)} characters)*"
        text = text if len(text) <= limit else text[:limit] + " …"
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return text.replace("|", "\\|").replace("\n", "<br>")

    rows = [
        "| question | gold | " + " | ".join(r.name for r in results) + " |",
        "|---|---|" + "---|" * len(results),
    ]
    for i in range(min(k, *(r.n for r in results))):
        first = results[0].predictions[i]
        outs = " | ".join(cell(r.predictions[i]["completion"]) for r in results)
        rows.append(f"| {cell(first['question'])} | {first['gold']} | {outs} |")
    return "\n".join(rows)


def plot_comparison(
    results: Sequence[EvalResult], path: str | pathlib.Path, title: str = "GSM8K evaluation"
) -> Figure:
    """Bar chart of accuracy (with 95% CI) and format rate per model; saved as PNG and returned."""
    import matplotlib.pyplot as plt

    names = [r.name for r in results]
    x = np.arange(len(results))
    acc = np.array([r.accuracy for r in results])
    err = np.array(
        [[r.accuracy - r.ci_low for r in results], [r.ci_high - r.accuracy for r in results]]
    )
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(results), 3.6))
    ax.bar(x - 0.2, acc, 0.4, yerr=err, capsize=4, label="accuracy (95% CI)", color="#4C72B0")
    ax.bar(x + 0.2, [r.format_rate for r in results], 0.4, label="format rate", color="#DD8452")
    ax.set_xticks(x, names)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("share of questions")
    ax.set_title(f"{title} (n={results[0].n})" if results else title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    runlog.save_figure(fig, path)
    return fig
