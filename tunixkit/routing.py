"""Adapters routed by domain (notebook 09): one LoRA adapter per group of domains, trained from one
base, a router that picks each prompt's adapter, generation that swaps adapters in place (the base
is loaded once), and the merged alternative, one checkpoint holding every adapter.

- :func:`train_adapters` trains each adapter on its own rows, one after another, on a single LoRA
  module over the base (its adapter weights reset to the same start before each), and keeps each
  adapter's weights; a rerun restores each from its checkpoint.
- :func:`route` is the keyword router (:func:`tunixkit.domains.classify`: each domain's words),
  :class:`Router` a small learned one (naive Bayes over the words of the training prompts);
  :func:`router_accuracy` measures either on prompts whose domain is known.
- :class:`Swapper` puts an adapter's weights into the module (``nnx.update``, no reload) and times
  each swap; :func:`tunixkit.domains.evaluate` answers each route's prompts after its swap
  (``route=``, ``use=``).
- :func:`merge` writes a weighted sum of the adapters into one LoRA module of their summed rank
  (the A matrices side by side, each B scaled by its weight): the competition judges a single
  checkpoint, and this one exports like any other.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import pathlib
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from flax import nnx

from tunixkit import domains, models, training

if TYPE_CHECKING:
    from jax.sharding import Mesh

    from tunixkit.models import LoadedModel
    from tunixkit.session import Clock

__all__ = ["Router", "Swapper", "merge", "route", "router_accuracy", "train_adapters"]


def _copy(state: nnx.State) -> nnx.State:
    """A copy in new buffers (a train step donates the ones it is given)."""
    return jax.tree.map(jnp.copy, state)


def route(prompt: str, routes: Mapping[str, Sequence[str]]) -> str:
    """The keyword router: the adapter whose domains hold the prompt's domain by keywords
    (:func:`tunixkit.domains.classify`), else the first adapter.

    >>> routes = {"math": ["math"], "writing": ["creative", "ideation"]}
    >>> route("Write a short poem about the sea.", routes), route("What is 12 + 30?", routes)
    ('writing', 'math')
    """
    domain = domains.classify(prompt)
    return next((name for name, ds in routes.items() if domain in ds), next(iter(routes)))


_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    words = _WORD.findall(text.lower())
    return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]


@dataclasses.dataclass
class Router:
    """A small learned router: naive Bayes over the words and word pairs of prompts whose domain
    is known (:meth:`fit`, e.g. the training rows), each domain's adapter from ``routes``.

    >>> rows = [{"prompt": "Write a poem about rain", "domain": "creative"},
    ...         {"prompt": "What is 3 + 4? How many?", "domain": "math"}]
    >>> Router.fit(rows, {"math": ["math"], "writing": ["creative"]})("A poem about snow")
    'writing'
    """

    routes: Mapping[str, Sequence[str]]
    counts: dict[str, collections.Counter[str]]
    priors: dict[str, float]

    @classmethod
    def fit(cls, rows: Sequence[Mapping[str, str]], routes: Mapping[str, Sequence[str]]) -> Router:
        counts: dict[str, collections.Counter[str]] = {}
        for r in rows:
            counts.setdefault(r["domain"], collections.Counter()).update(_words(r["prompt"]))
        n = collections.Counter(r["domain"] for r in rows)
        return cls(routes, counts, {d: math.log(k / len(rows)) for d, k in n.items()})

    def domain(self, prompt: str) -> str:
        vocab = len(set().union(*self.counts.values())) + 1
        words = _words(prompt)

        def score(d: str) -> float:
            c, total = self.counts[d], sum(self.counts[d].values())
            return self.priors[d] + sum(math.log((c[w] + 1) / (total + vocab)) for w in words)

        return max(self.counts, key=score)

    def __call__(self, prompt: str) -> str:
        domain = self.domain(prompt)
        return next((n for n, ds in self.routes.items() if domain in ds), next(iter(self.routes)))


def router_accuracy(
    tasks: Sequence[Mapping[str, str]],
    routes: Mapping[str, Sequence[str]],
    pick: Callable[[str], str],
) -> dict[str, Any]:
    """Per domain and ``all``: the share of ``tasks`` (with their true ``domain``) that ``pick``
    (prompt -> adapter) sends to the adapter of that domain, and where the others went; and its
    time per prompt."""
    want = {d: name for name, ds in routes.items() for d in ds}
    t0 = time.perf_counter()
    got = [pick(t["prompt"]) for t in tasks]
    per_prompt = (time.perf_counter() - t0) / max(1, len(tasks))
    out: dict[str, Any] = {}
    for domain in [*sorted({t["domain"] for t in tasks}), "all"]:
        idx = [i for i, t in enumerate(tasks) if domain in ("all", t["domain"])]
        right = [got[i] == want.get(tasks[i]["domain"]) for i in idx]
        wrong: dict[str, int] = {}
        for i, ok in zip(idx, right, strict=True):
            if not ok:
                wrong[got[i]] = wrong.get(got[i], 0) + 1
        out[domain] = {"n": len(idx), "accuracy": sum(right) / len(idx), "sent_to": wrong}
    out["seconds_per_prompt"] = per_prompt
    return out


def train_adapters(
    base: LoadedModel,
    sets: Mapping[str, Sequence[tuple[str, str]]],
    folder: str | pathlib.Path,
    *,
    rank: int,
    alpha: float,
    steps: Mapping[str, int],
    learning_rate: float,
    batch_size: int,
    max_len: int,
    mesh: Mesh | None = None,
    clock: Clock | None = None,
) -> tuple[nnx.Module, dict[str, nnx.State], dict[str, training.RunResult]]:
    """One LoRA adapter per entry of ``sets`` ((prompt, completion) pairs), ``steps[name]`` steps
    each, on one LoRA module over ``base`` (returned, with each adapter's weights and run).
    Every adapter starts from the same LoRA weights; its checkpoints are in ``folder/<name>``."""
    lora = models.apply_lora(
        base.model, family=base.family, rank=rank, alpha=alpha, mesh=mesh, verbose=False
    )
    start = _copy(nnx.state(lora, nnx.LoRAParam))
    adapters, runs = {}, {}
    for name, pairs in sets.items():
        nnx.update(lora, _copy(start))
        n = steps[name]
        batches = training.sft_dataset(
            pairs, base.tokenizer, max_len=max_len, batch_size=batch_size, num_batches=n
        )
        config = training.trainer_config(
            pathlib.Path(folder) / name,
            max_steps=n,
            eval_every=10**9,
            checkpoint_every=max(10, n // 4),
            description=f"adapter {name}",
        )
        trainer = training.sft_trainer(
            lora, training.optimizer(learning_rate, n), config, pad_id=base.tokenizer.pad_id()
        )
        runs[name] = training.run(
            trainer,
            batches,
            mesh=mesh,
            metrics_file=pathlib.Path(folder) / name / "metrics.jsonl",
            session=clock,
            label=f"adapter {name}",
        )
        adapters[name] = _copy(nnx.state(lora, nnx.LoRAParam))
    return lora, adapters, runs


@dataclasses.dataclass
class Swapper:
    """Puts adapter ``name``'s weights into ``lora`` in place (the base stays loaded) and keeps
    each swap's seconds (until the new weights are on the device)."""

    lora: nnx.Module
    adapters: Mapping[str, nnx.State]
    seconds: list[float] = dataclasses.field(default_factory=list)
    current: str | None = None

    def __call__(self, name: str) -> None:
        t0 = time.perf_counter()
        nnx.update(self.lora, _copy(self.adapters[name]))
        jax.block_until_ready(jax.tree.leaves(nnx.state(self.lora, nnx.LoRAParam)))
        self.seconds.append(time.perf_counter() - t0)
        self.current = name


def merge(
    base: LoadedModel,
    adapters: Mapping[str, nnx.State],
    weights: Mapping[str, float],
    *,
    rank: int,
    alpha: float,
    mesh: Mesh | None = None,
) -> nnx.Module:
    """One LoRA module over ``base`` whose update is ``sum(weights[n] * update of adapter n)``:
    rank ``len(adapters) * rank``, the adapters' A matrices side by side along the rank and their B
    matrices stacked, each scaled by its weight (alpha grows with the rank, so that alpha / rank,
    the update's scale, stays each adapter's)."""
    names = list(adapters)
    if set(weights) != set(names):
        raise ValueError(
            f"merge: weights for {sorted(weights)}, adapters {sorted(names)}: one weight each"
        )
    k = len(names)
    merged = models.apply_lora(
        base.model, family=base.family, rank=k * rank, alpha=k * alpha, mesh=mesh, verbose=False
    )
    template = nnx.state(merged, nnx.LoRAParam)
    flat = [jax.tree_util.tree_flatten_with_path(adapters[n])[0] for n in names]
    leaves, treedef = jax.tree_util.tree_flatten(template)
    out = []
    for j, big in enumerate(leaves):
        parts = [f[j][1] for f in flat]
        key = jax.tree_util.keystr(flat[0][j][0])
        axis = next(
            a for a, (x, y) in enumerate(zip(parts[0].shape, big.shape, strict=True)) if y == k * x
        )
        if "lora_b" in key:  # the B matrices carry the weights
            parts = [p * weights[n] for p, n in zip(parts, names, strict=True)]
        out.append(jnp.concatenate(parts, axis=axis).astype(big.dtype))
    nnx.update(merged, jax.tree_util.tree_unflatten(treedef, out))
    return merged
