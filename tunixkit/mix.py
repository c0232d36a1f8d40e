"""The default public data mix of notebook 06: traces for the six judged domains from public
Hugging Face data sets, when the user brings none (``TRACES = None`` in the full profile).

Per domain, the data set, its licence and why:

- creative, ideation, summarization: ``databricks/databricks-dolly-15k`` (categories
  ``creative_writing``, ``brainstorming``, ``summarization``), CC BY-SA 3.0: written by people,
  not a model; one file of 15k rows; summarization rows carry their passage.
- science: ``allenai/qasc``, CC BY 4.0: 8.1k grade-school science questions, each with the two
  facts that compose into its answer (the reasoning) and the composed fact (the answer, a sentence
  that states it, not a bare choice).
- code: ``google-research-datasets/mbpp`` (``full``), CC BY 4.0: short Python tasks with a
  reference solution.

The licence rule: the default mix uses only data sets whose licence allows commercial use (each
:class:`Source` names its licence). ``allenai/sciq`` (CC BY-NC 3.0: exam questions with a
supporting paragraph, but a one-to-three-word answer) is used only with ``noncommercial=True``
(``MIX_NONCOMMERCIAL`` in notebook 06), and said either way.

Math comes from GSM8K (MIT: worked solutions and a checkable answer, for GRPO's answer reward),
read by :func:`tunixkit.recipes.gsm8k` as in every notebook (``GSM8K_PATH`` for a local copy).

Each converter turns one row into ``{domain, prompt, response}`` with the response in the
``<reasoning>``/``<answer>`` format and closed by the model's end of turn, or says why it cannot
(:class:`Skip`); :func:`load_mix` counts the skipped rows per data set and reason. No trace
carries a reasoning text the data set did not write: dolly's and MBPP's rows have none, so their
response is the data set's answer alone, marked ``reasoned: False``. Notebook 06 never trains on
such a row as it is: the model answers the prompt itself, reasoning first, and its answer is kept
only where the judge scores it at least as high as the data set's answer behind the same
reasoning; elsewhere the data set's answer follows the model's reasoning
(:func:`tunixkit.pipeline.write_reasoning`, rejection sampling); a row with no whole answer in
the format is left out of stage 1 and counted. The shares of the domains are the recipe's
``domain_shares`` (:func:`tunixkit.domains.take_shares`).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tunixkit import data, prompting

__all__ = ["SOURCES", "Skip", "Source", "convert"]

DOLLY_DOMAINS = {
    "creative_writing": "creative",
    "brainstorming": "ideation",
    "summarization": "summarization",
}


class Skip(Exception):
    """A row that cannot become a trace, with the reason (counted by :func:`load_mix`)."""


def _text(row: Mapping[str, Any], field: str) -> str:
    value = row.get(field)
    if not isinstance(value, str) or not value.strip():
        raise Skip(f"empty {field!r}")
    return value.strip()


def dolly(row: Mapping[str, Any], family: str = "gemma3") -> dict[str, Any]:
    """A ``databricks-dolly-15k`` row (``instruction``, ``context``, ``response``, ``category``).

    >>> dolly({"instruction": "Name two uses of a brick.", "context": "",
    ...        "response": "Build; paint.", "category": "brainstorming"})
    {'domain': 'ideation', 'prompt': 'Name two uses of a brick.', \
'response': '<answer>Build; paint.</answer><end_of_turn>', 'reasoned': False}
    """
    domain = DOLLY_DOMAINS.get(str(row.get("category")))
    if domain is None:
        raise Skip(f"category {row.get('category')!r} is not a judged domain")
    prompt = _text(row, "instruction")
    context = str(row.get("context") or "").strip()
    if domain == "summarization":
        if not context:
            raise Skip("summarization without its passage")
        prompt = f"{prompt}\n\n{context}"
    return _unreasoned(domain, prompt, _text(row, "response"), family)


def sciq(row: Mapping[str, Any], family: str = "gemma3") -> dict[str, Any]:
    """An ``allenai/sciq`` row: the supporting paragraph is the reasoning.

    >>> sciq({"question": "What do plants need to grow?", "correct_answer": "light",
    ...       "support": "Plants make food from light."})["response"]
    '<reasoning>Plants make food from light.</reasoning>\\n<answer>light</answer><end_of_turn>'
    """
    support = _text(row, "support") if row.get("support") else None
    if support is None:
        raise Skip("no supporting paragraph to reason from")
    answer = _text(row, "correct_answer")
    return {
        "domain": "science",
        "prompt": _text(row, "question"),
        "response": _completion(support, answer, family),
    }


def _sentence(text: str) -> str:
    """``text`` as a sentence: capitalised, ending in a full stop.

    >>> _sentence("clouds are made of water vapor"), _sentence("Wind turns turbines.")
    ('Clouds are made of water vapor.', 'Wind turns turbines.')
    """
    text = text.strip()
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


def qasc(row: Mapping[str, Any], family: str = "gemma3") -> dict[str, Any]:
    """An ``allenai/qasc`` row (``question``, ``choices``, ``answerKey``, ``fact1``, ``fact2``,
    ``combinedfact``): the two facts are the reasoning, the composed fact the answer, kept only
    where it states the right choice.

    >>> row = {"question": "What can heating air make?", "answerKey": "B",
    ...        "choices": {"text": ["rock", "electricity"], "label": ["A", "B"]},
    ...        "fact1": "heating air makes wind", "fact2": "Wind turns turbines.",
    ...        "combinedfact": "heating air can make electricity"}
    >>> print(qasc(row)["response"])
    <reasoning>Heating air makes wind. Wind turns turbines.</reasoning>
    <answer>Heating air can make electricity.</answer><end_of_turn>
    """
    question = _text(row, "question")
    facts = " ".join(_sentence(_text(row, f)) for f in ("fact1", "fact2"))
    combined = _sentence(_text(row, "combinedfact"))
    choices = row.get("choices") or {}
    by_label = dict(zip(choices.get("label") or [], choices.get("text") or [], strict=False))
    choice = by_label.get(str(row.get("answerKey") or ""))
    if not choice:
        raise Skip("no answer choice for its answerKey")
    if str(choice).lower() not in combined.lower():
        raise Skip("the composed fact does not state the answer")
    return {
        "domain": "science",
        "prompt": question,
        "response": _completion(facts, combined, family),
    }


def mbpp(row: Mapping[str, Any], family: str = "gemma3") -> dict[str, Any]:
    """A ``google-research-datasets/mbpp`` row (``text``, ``code``, ``test_list``): the task, the
    tests the function must pass, and the reference solution as the answer (no reasoning: MBPP
    has none)."""
    task = _text(row, "text")
    tests = [str(t) for t in row.get("test_list") or []]
    prompt = task + ("\nIt must pass:\n" + "\n".join(tests) if tests else "")
    return _unreasoned("code", prompt, _text(row, "code"), family)


def _completion(reasoning: str, answer: str, family: str) -> str:
    return prompting.format_completion(reasoning, answer, family=family)


def _unreasoned(domain: str, prompt: str, answer: str, family: str) -> dict[str, Any]:
    """A row whose data set wrote no reasoning: its answer alone, for the model to reason toward
    (:func:`tunixkit.pipeline.write_reasoning`)."""
    return {
        "domain": domain,
        "prompt": prompt,
        "response": prompting.format_completion(None, answer, family=family),
        "reasoned": False,
    }


@dataclasses.dataclass(frozen=True)
class Source:
    """One data set of the mix: where it is, which split and config, and its converter."""

    dataset: str  # a Hugging Face id
    convert: Callable[..., dict[str, Any]]
    licence: str
    commercial: bool = True  # whether the licence allows commercial use (the default mix's rule)
    split: str = "train"
    config: str | None = None


SOURCES = (
    Source("databricks/databricks-dolly-15k", dolly, "CC BY-SA 3.0"),
    Source("allenai/qasc", qasc, "CC BY 4.0"),
    Source("google-research-datasets/mbpp", mbpp, "CC BY 4.0", split="train+test", config="full"),
    Source("allenai/sciq", sciq, "CC BY-NC 3.0", commercial=False),
)


def convert(
    rows: Sequence[Mapping[str, Any]], source: Source, *, family: str = "gemma3"
) -> tuple[list[dict[str, Any]], collections.Counter]:
    """(traces, skipped rows by reason) of ``rows`` of ``source``.

    >>> traces, skipped = convert([{"question": "q", "correct_answer": "a", "support": ""}],
    ...                           SOURCES[3])
    >>> traces, dict(skipped)
    ([], {'no supporting paragraph to reason from': 1})
    """
    out, skipped = [], collections.Counter()
    for row in rows:
        try:
            out.append(source.convert(row, family))
        except Skip as why:
            skipped[str(why)] += 1
    return out, skipped


def load_mix(
    per_domain: int,
    *,
    paths: Mapping[str, str] | None = None,
    family: str = "gemma3",
    load: Callable[..., list[dict[str, Any]]] = data.load_rows,
    noncommercial: bool = False,
) -> list[dict[str, Any]]:
    """At most ``per_domain`` traces of each domain of :data:`SOURCES` (all but math), in the data
    sets' order, interleaved by domain. ``paths``: a local file for a data set id (attached on
    Kaggle, or a test's fixture). A data set whose licence forbids commercial use is left out
    unless ``noncommercial`` (said either way). Skipped rows are printed per data set and reason,
    then the traces per domain; a data set that gives no trace at all raises
    :class:`tunixkit.data.DataError` naming it."""
    by_domain: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for source in SOURCES:
        if not source.commercial and not noncommercial:
            print(
                f"{source.dataset}: left out ({source.licence}, non-commercial; "
                "noncommercial=True, MIX_NONCOMMERCIAL in notebook 06, uses it)"
            )
            continue
        where = (paths or {}).get(source.dataset, source.dataset)
        rows = load(where, source.split, name=source.config)
        traces, skipped = convert(rows, source, family=family)
        if not traces:
            raise data.DataError(
                f"{where}: none of its {len(rows)} rows could be converted ({dict(skipped)}); "
                f"expected the columns of {source.dataset}"
            )
        kept = collections.Counter()
        for t in traces:
            if len(by_domain[t["domain"]]) < per_domain:
                by_domain[t["domain"]].append(t)
                kept[t["domain"]] += 1
        said = ", ".join(f"{n} skipped: {why}" for why, n in skipped.most_common())
        print(
            f"{where} ({source.licence}): {len(rows)} rows, {dict(kept)} taken"
            + (f" ({said})" if said else "")
        )
    print(f"the mix by domain: { {d: len(rows) for d, rows in by_domain.items()} }")
    unreasoned = collections.Counter(
        d for d, rows in by_domain.items() for t in rows if t.get("reasoned") is False
    )
    if unreasoned:
        print(
            f"without reasoning of their own (the model writes it; notebook 06): {dict(unreasoned)}"
        )
    lists = list(by_domain.values())
    return [t for group in zip(*lists, strict=False) for t in group] + [
        t for rows in lists for t in rows[min(map(len, lists)) :]
    ]
