"""Multi-domain tasks (the competition's mix) and their evaluation: traces, a judge, per-domain
scores.

The competition judges ``<reasoning>``/``<answer>`` responses on creative writing, ideation,
summarization, science, math and code (math and code weighted down). This module holds:

- :func:`load_traces`: SFT traces from a local file or a Hugging Face dataset, in chat-messages
  (``messages``/``conversations``) or prompt/response form, as records
  ``{"domain", "prompt", "response"}``; any other shape is an error naming the columns found;
- :func:`calibrate`: a judge's scores of known good and bad answers per domain, before training
  relies on it (the smoke profile's tasks and rubric grader are in :mod:`tunixkit.testing`);
- :func:`evaluate`: per domain, format compliance, answers under the length limit, judged score with
  a 95% interval (of greedy answers, and of sampled ones), and math accuracy; :func:`table` /
  :func:`plot` for several stages side by side; :func:`paired_change` / :func:`stage_changes` /
  :func:`changes_table` for each stage's own effect, compared prompt by prompt.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import pathlib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tunixkit import data, evaluation, prompting, runlog, stats
from tunixkit.answers import is_correct
from tunixkit.rewards import has_format

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tunixkit.judging import Judge
    from tunixkit.models import LoadedModel

__all__ = [
    "DomainScores",
    "evaluate",
    "examples",
    "classify",
    "plot",
    "side_by_side",
    "stage_changes",
    "changes_table",
    "split_heldout",
    "CalibrationError",
    "act_on_calibration",
    "calibrate",
    "calibration_table",
    "length_table",
    "table",
    "balanced",
    "by_domain",
    "take_shares",
]

DOMAINS = ("creative", "ideation", "summarization", "science", "math", "code")
MAX_ANSWER_TOKENS = 1024  # the judges read answers under 1K tokens


_KEYWORDS = (  # classify(): the first domain one of whose words starts a word of the prompt
    ("code", ("python", "function", "code", "program", "script", "sql", "javascript", "regex")),
    ("summarization", ("summar", "tl;dr", "main points", "key points", "in a nutshell")),
    (
        "creative",
        ("poem", "poetry", "story", "haiku", "limerick", "song", "lyrics", "fiction", "sonnet"),
    ),
    ("ideation", ("ideas", "brainstorm", "suggest", "ways to", "tips", "names for")),
    (
        "science",
        (
            "science",
            "physics",
            "chemi",
            "biolog",
            "atom",
            "molecul",
            "energy",
            "planet",
            "gravity",
            "cells",
            "evolution",
            "climate",
            # everyday science questions, which name no field ("Why does ice float on water?")
            "why does",
            "why do ",
            "why is the",
            "why are",
            "what causes",
            "how does the",
            "float",
            "boil",
            "freez",
            "melt",
            "temperature",
            "heat",
            "pressure",
            "density",
            "photosynth",
            "dna",
            "genes",
            "genetic",
            "protein",
            "virus",
            "bacteri",
            "vaccin",
            "organism",
            "species",
            "ecosystem",
            "electric",
            "magnet",
            "light",
            "orbit",
            "earth",
            "moon",
            "stars",
            "star ",
            "season",
            "weather",
        ),
    ),
    ("math", ("how many", "how much", "calculate", "solve", "equation", "percent", "sum of")),
)


def classify(prompt: str) -> str:
    """The domain of a prompt by the keywords of :data:`_KEYWORDS`, tried in that order (code,
    summarization, creative, ideation, science, math); ``"general"`` when none matches.

    >>> [classify(p) for p in ("Write a Python function to sort.", "Summarize the text above.",
    ...                        "A haiku about rain, please.", "How many apples are left?", "Hi!",
    ...                        "Why does ice float on water?", "What causes the seasons?")]
    ['code', 'summarization', 'creative', 'math', 'general', 'science', 'science']
    """
    text = prompt.lower()
    for domain, words in _KEYWORDS:
        if re.search(r"\b(?:" + "|".join(re.escape(w) for w in words) + ")", text):
            return domain
    return "general"


def load_traces(
    source: str,
    split: str = "train",
    *,
    domain: str | None = None,
    domain_field: str = "domain",
    fields: Sequence[str] = ("prompt", "response"),
    limit: int | None = None,
) -> list[dict[str, str]]:
    """SFT traces from a local ``.jsonl``/``.json``/``.csv``/``.parquet`` file or a HF dataset id
    (its first ``limit`` rows at most: a split is sliced, never read whole).

    Two shapes are understood: chat messages (a ``messages`` or ``conversations`` column holding
    ``[{"role": "user", "content": ...}, {"role": "assistant", "content": ...}]``, the last user
    turn is the prompt, the assistant turn after it the response) and prompt/response columns
    (``fields``). Each trace's domain is its ``domain_field`` column's, else ``domain``, else its
    prompt's by :func:`classify` (counted and printed). Anything else raises
    :class:`tunixkit.data.DataError` naming the columns found and the ones expected.
    """
    rows = data.load_rows(source, split, limit=limit)
    if not rows:
        raise data.DataError(f"{source}: no rows")
    cols = sorted(rows[0])
    chat = next((c for c in ("messages", "conversations") if c in rows[0]), None)
    if chat is None and not all(f in rows[0] for f in fields):
        raise data.DataError(
            f"{source}: columns {cols}; expected a 'messages' (or 'conversations') column of "
            f"chat turns, or the columns {list(fields)} (set the field names to yours)"
        )
    if domain_field != "domain" and not any(domain_field in row for row in rows):
        raise data.DataError(
            f"{source}: no column {domain_field!r} (the domain field asked for) in any of its "
            f"{len(rows)} rows; the columns are {cols}. Name one of them, or leave it at 'domain' "
            f"to classify each prompt by keywords"
        )
    out, skipped, classified = [], 0, collections.Counter()
    for i, row in enumerate(rows, start=1):
        if chat is not None:
            turns = row[chat]
            if not isinstance(turns, list) or not all(isinstance(t, Mapping) for t in turns):
                raise data.DataError(
                    f"{source}: row {i}: {chat!r} is not a list of {{role, content}} turns"
                )
            roles = [str(t.get("role") or t.get("from") or "") for t in turns]
            texts = [str(t.get("content") or t.get("value") or "") for t in turns]
            reply = max(
                (j for j, r in enumerate(roles) if r in ("assistant", "model", "gpt")), default=-1
            )
            asked = max(
                (j for j, r in enumerate(roles[:reply]) if r in ("user", "human")), default=-1
            )
            prompt, response = (texts[asked], texts[reply]) if asked >= 0 else ("", "")
        else:
            prompt, response = str(row[fields[0]] or ""), str(row[fields[1]] or "")
        if not prompt.strip() or not response.strip():
            skipped += 1
            continue
        named = row.get(domain_field) or domain
        if not named:
            named = classify(prompt)
            classified[named] += 1
        out.append({"domain": str(named), "prompt": prompt.strip(), "response": response.strip()})
    if not out:
        shape = (
            f"{chat!r} needs a user turn and an assistant turn after it"
            if chat
            else f"the columns {list(fields)} need text"
        )
        raise data.DataError(
            f"{source}: none of its {len(rows)} rows is a trace (empty prompt or response): {shape}"
        )
    print(
        f"{source}: {len(out)} traces"
        + (f", {skipped} skipped (empty prompt or response)" if skipped else "")
        + (
            f"; without a {domain_field!r} column, classified by keywords: {dict(classified)}"
            if classified
            else ""
        )
    )
    return out


def math_tasks(records: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """GSM8K records (``question``, ``solution``, ``answer``) as math task records.

    >>> math_tasks([{"question": "1+1?", "solution": "1+1=2", "answer": "2"}])[0]["response"]
    '<reasoning>1+1=2</reasoning>\\n<answer>2</answer><end_of_turn>'
    """
    return [
        {
            "domain": "math",
            "prompt": r["question"],
            "answer": r["answer"],
            "response": prompting.format_completion(r["solution"], r["answer"]),
        }
        for r in records
    ]


def split_heldout(
    records: Sequence[dict[str, str]], per_domain: int
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(held-out, rest): the last ``per_domain`` distinct prompts of each domain are held out, one
    record each, and no record of the rest repeats a held-out prompt (those are dropped, and
    counted in a printed line): the evaluations see prompts the stages never trained on.

    >>> rows = [{"domain": d, "prompt": f"{d}{i % 3}"} for i in range(5) for d in "ab"]
    >>> held, rest = split_heldout(rows, 1)
    held-out prompts: 2, 2 training records repeating one of them dropped
    >>> [r["prompt"] for r in held], [r["prompt"] for r in rest]
    (['a1', 'b1'], ['a0', 'b0', 'a2', 'b2', 'a0', 'b0'])
    """
    held: dict[str, int] = {}  # prompt -> index of the record held out
    taken: collections.Counter = collections.Counter()
    for i in reversed(range(len(records))):
        r = records[i]
        if taken[r["domain"]] < per_domain and r["prompt"] not in held:
            held[r["prompt"]] = i
            taken[r["domain"]] += 1
    rest = [r for i, r in enumerate(records) if r["prompt"] not in held]
    dropped = len(records) - len(rest) - len(held)
    if held:
        print(
            f"held-out prompts: {len(held)}, "
            f"{dropped} training records repeating one of them dropped"
        )
    return [records[i] for i in sorted(held.values())], rest


def examples(records: Sequence[Mapping[str, str]], k: int = 1) -> str:
    """A Markdown table of ``k`` prompts per domain with their reference answers."""
    rows, seen = ["| domain | prompt | reference answer |", "|---|---|---|"], collections.Counter()
    for r in records:
        if seen[r["domain"]] < k:
            seen[r["domain"]] += 1
            rows.append(
                f"| {r['domain']} | {_cell(r['prompt'])} | {_cell(r.get('response', ''))} |"
            )
    return "\n".join(rows)


def by_domain(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Rows per domain, in the order the domains first appear.

    >>> by_domain([{"domain": "math"}, {"domain": "code"}, {"domain": "math"}])
    {'math': 2, 'code': 1}
    """
    return dict(collections.Counter(r.get("domain", "general") for r in records))


def balanced(records: Sequence[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """``n`` of ``records`` (all when fewer) with the domains as even as their sizes allow: each
    domain gets an equal share, and a domain with fewer rows leaves the rest to the others. The
    last rows of each domain are taken, in their order in ``records``. A stage's prompts drawn this
    way see every domain, whatever order the data came in (traces first, then GSM8K math).

    >>> rows = [{"domain": "creative", "i": i} for i in range(6)]
    >>> rows += [{"domain": "math", "i": i} for i in range(20)]
    >>> (by_domain(balanced(rows, 10)), by_domain(balanced(rows, 20)),
    ...  [r["i"] for r in balanced(rows, 4)][:2])
    ({'creative': 5, 'math': 5}, {'creative': 6, 'math': 14}, [4, 5])
    """
    sizes = collections.Counter(r.get("domain", "general") for r in records)
    quota: collections.Counter = collections.Counter()
    left = min(n, len(records))
    while left:
        open_ = [d for d in sizes if quota[d] < sizes[d]]
        share = max(1, left // len(open_))
        for d in open_:
            take = min(share, sizes[d] - quota[d], left)
            quota[d] += take
            left -= take
            if not left:
                break
    seen: collections.Counter = collections.Counter()
    keep = []
    for i in reversed(range(len(records))):
        d = records[i].get("domain", "general")
        if seen[d] < quota[d]:
            seen[d] += 1
            keep.append(i)
    return [records[i] for i in sorted(keep)]


def take_shares(
    records: Sequence[dict[str, Any]],
    shares: Mapping[str, float] | None,
    total: int,
    *,
    max_repeat: int = 2,
    say: bool = True,
) -> list[dict[str, Any]]:
    """``total`` of ``records`` (at most as many as there are) with each domain's share exactly
    ``shares`` (``round`` of share x total, largest remainders first, so they sum to ``total``),
    spread evenly through the list. A domain with fewer rows than its share repeats them (said,
    with how many times), ``max_repeat`` times at most: past that the total shrinks (said, naming
    the domain); a share whose domain has no rows is said and the others scaled to fill it; rows
    of a domain without a share are left out (said). ``shares`` None: ``records`` as they are.
    The table of shares, rows and rows taken is printed (``say``) before training.

    >>> rows = [{"domain": "math", "i": i} for i in range(10)]
    >>> rows += [{"domain": "creative", "i": i} for i in range(2)]
    >>> rows += [{"domain": "general", "i": 0}]
    >>> taken = take_shares(rows, {"math": 0.5, "creative": 0.5, "code": 0.2}, 8)
    shares of the training rows (domain_shares): 8 rows
    | domain | share | rows | taken |
    |---|---|---|---|
    | math | 0.50 | 10 | 4 |
    | creative | 0.50 | 2 | 4 (each row 2x) |
    code: no rows for its share 0.2; the other shares were scaled up to fill it
    general: 1 rows left out (no share in domain_shares)
    >>> [r["domain"][0] for r in taken], [r["i"] for r in taken if r["domain"] == "creative"]
    (['m', 'c', 'm', 'c', 'm', 'c', 'm', 'c'], [0, 1, 0, 1])
    >>> len(take_shares(rows, {"math": 0.5, "creative": 0.5}, 12, max_repeat=2, say=False))
    8
    """
    if shares is None:
        return list(records)
    groups: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in records:
        groups[r.get("domain", "general")].append(r)
    wanted = {d: float(w) for d, w in shares.items() if w > 0 and groups.get(d)}
    if not wanted:
        raise ValueError(
            f"domain_shares {dict(shares)}: none of its domains has rows; the data has "
            f"{by_domain(records)}"
        )
    scale = sum(wanted.values())
    asked = total = min(total, sum(len(groups[d]) for d in wanted))
    limit, tightest = min((len(groups[d]) * max_repeat * scale / w, d) for d, w in wanted.items())
    total = min(total, int(limit))
    exact = {d: w / scale * total for d, w in wanted.items()}
    counts = {d: int(x) for d, x in exact.items()}
    for d in sorted(exact, key=lambda d: counts[d] - exact[d])[: total - sum(counts.values())]:
        counts[d] += 1
    lines = [
        f"shares of the training rows (domain_shares): {total} rows"
        + (
            f" ({asked} asked; {tightest}'s {len(groups[tightest])} rows {max_repeat}x at most)"
            if total < asked
            else ""
        ),
        "| domain | share | rows | taken |",
        "|---|---|---|---|",
    ]
    keyed = []
    for d, n in counts.items():
        have = groups[d]
        times = -(-n // len(have))
        lines.append(
            f"| {d} | {wanted[d] / scale:.2f} | {len(have)} | {n}"
            + (f" (each row {times}x) |" if times > 1 else " |")
        )
        keyed += [((k + 0.5) / n, i, have[k % len(have)]) for i, k in enumerate(range(n))]
    for d, w in shares.items():
        if w > 0 and not groups.get(d):
            lines.append(
                f"{d}: no rows for its share {w:g}; the other shares were scaled up to fill it"
            )
    for d, have in groups.items():
        if d not in wanted:
            lines.append(f"{d}: {len(have)} rows left out (no share in domain_shares)")
    if say:
        print("\n".join(lines))
    return [r for _, _, r in sorted(keyed, key=lambda x: (x[0], x[1]))]


CALIBRATION_MARGINS = {"other_prompt": 0.2, "untagged": 0.05}  # reference above each, at least


def calibrate(judge: Judge, records: Sequence[Mapping[str, str]]) -> dict:
    """The judge's calibration before training relies on it: per domain, the mean judged score
    of each held-out prompt's reference answer, of *another* prompt's reference (a good answer to
    the wrong question), and of the reference stripped of its ``<reasoning>``/``<answer>`` tags
    (the format the judges ask for, missing). A judge worth training against scores the reference
    above both (by :data:`CALIBRATION_MARGINS`); each domain where it does not is named in
    ``warnings``.

    Returns ``{"rows": {domain: {"n", "reference", "other_prompt", "untagged"}},
    "warnings": [...]}``.
    """
    prompts = [r["prompt"] for r in records]
    good = [r["response"] for r in records]
    shifted = []  # the answer of the next other prompt of the same domain (else of any domain)
    for i, r in enumerate(records):
        other = [j for j, o in enumerate(records) if o["prompt"] != r["prompt"]]
        same = [j for j in other if records[j]["domain"] == r["domain"]] or other or [i]
        shifted.append(good[next((j for j in same if j > i), same[0])])
    untagged = [re.sub(r"</?(reasoning|answer)>", "", g) for g in good]
    scores = judge.scores(prompts * 3, good + shifted + untagged)
    n = len(records)
    kinds = {
        "reference": scores[:n],
        "other_prompt": scores[n : 2 * n],
        "untagged": scores[2 * n :],
    }
    rows, warnings, failed = {}, [], []
    for domain in [*sorted({r["domain"] for r in records}), "all"]:
        idx = [i for i, r in enumerate(records) if domain in ("all", r["domain"])]
        row = {"n": len(idx)} | {k: sum(v[i] for i in idx) / len(idx) for k, v in kinds.items()}
        rows[domain] = row
        for bad, margin in CALIBRATION_MARGINS.items():
            if domain != "all" and row["reference"] - row[bad] < margin:
                warnings.append(
                    f"{domain}: the judge scores {bad.replace('_', ' ')} answers "
                    f"{row[bad]:.2f} against {row['reference']:.2f} for the references"
                )
                failed += [] if domain in failed else [domain]
    return {"rows": rows, "warnings": warnings, "failed": failed}


JUDGE_CHECKS = ("ignore", "stop", "warn")  # what a failed calibration does (JUDGE_CHECK)


class CalibrationError(RuntimeError):
    """The judge failed its calibration in some domain, and ``JUDGE_CHECK = "stop"``."""


def act_on_calibration(
    calibration: Mapping[str, Any],
    judge: Judge,
    records: Sequence[Mapping[str, str]],
    policy: str,
    *,
    rehearsal: bool = False,
) -> list[str]:
    """What a domain the judge failed (:func:`calibrate`'s ``failed``) does to the run, by
    ``policy`` (``JUDGE_CHECK``): ``"ignore"``: the judge scores its questions 0 without grading
    them (:meth:`tunixkit.judging.Judge.ignore`: GRPO trains it on the other rewards, no pair or
    kept answer comes from it, its judged scores stop moving); ``"stop"``: :class:`CalibrationError`
    before any training; ``"warn"``: said, and the judge is used as it is. ``records``: the tasks
    whose questions the judge will see (their ``prompt`` and ``domain``). In a ``rehearsal`` the
    judge keeps grading whatever the policy (its time is what the rehearsal measures; random
    weights fail every domain), and what the real run would do is said. Returns the failed
    domains.

    >>> from tunixkit.judging import Judge
    >>> judge = Judge(lambda qs, cs: ["Score: 9"] * len(qs))
    >>> records = [{"prompt": "Write a poem.", "domain": "creative"},
    ...            {"prompt": "1+1?", "domain": "math"}]
    >>> act_on_calibration({"failed": ["creative"]}, judge, records, "ignore")  # doctest: +ELLIPSIS
    judge: ignored in creative (it failed its calibration there; ...): those answers score 0 ...
    ['creative']
    >>> judge.scores(["Write a poem.", "1+1?"], ["a", "b"])
    [0.0, 0.9]
    """
    if policy not in JUDGE_CHECKS:
        raise ValueError(f"JUDGE_CHECK={policy!r}: expected one of {JUDGE_CHECKS}")
    failed = list(calibration["failed"])
    if not failed:
        return []
    if rehearsal and policy != "warn":
        print(
            f"judge: failed its calibration in {', '.join(failed)}; a rehearsal keeps it grading "
            f"there to time it (the real run would {policy}: JUDGE_CHECK={policy!r})"
        )
        return failed
    if policy == "stop":
        raise CalibrationError(
            f"the judge failed its calibration in {', '.join(failed)} (see the table above): use "
            "a stronger judge (JUDGE_ID), or set JUDGE_CHECK = 'ignore' (those domains train on "
            "the other rewards) or 'warn' (the judge is used as it is)"
        )
    if policy == "ignore":
        judge.ignore(failed, {r["prompt"]: r["domain"] for r in records})
        print(
            f"judge: ignored in {', '.join(failed)} (it failed its calibration there; "
            "JUDGE_CHECK='ignore'): those answers score 0 and are not graded"
        )
    else:
        print(f"judge: used as it is in {', '.join(failed)}, which it failed (JUDGE_CHECK='warn')")
    return failed


_CALIBRATED = ("reference", "other_prompt", "untagged")  # the answers calibration scores


def calibration_table(calibration: Mapping[str, Any]) -> str:
    """Markdown of :func:`calibrate`: one row per domain, then its warnings.

    >>> row = {"n": 4, "reference": 0.9, "other_prompt": 0.3, "untagged": 0.75}
    >>> print(calibration_table({"rows": {"code": row}, "warnings": ["code: ..."]}))
    | domain | n | reference answer | another prompt's answer | untagged reference |
    |---|---|---|---|---|
    | code | 4 | 0.90 | 0.30 | 0.75 |
    <BLANKLINE>
    **The judge does not tell these apart** (JUDGE_ID, or its rubric, needs a look): code: ...
    >>> zero = {"n": 4, "reference": 0.0, "other_prompt": 0.0, "untagged": 0.0}
    >>> print(calibration_table({"rows": {"code": zero}, "warnings": []}).splitlines()[-1])
    **The judge scored every answer 0**: it is not grading (an error printed above, or replies ...
    """
    rows = [
        "| domain | n | reference answer | another prompt's answer | untagged reference |",
        "|---|---|---|---|---|",
    ]
    for domain, r in calibration["rows"].items():
        rows.append(
            f"| {domain} | {r['n']} | {r['reference']:.2f} | {r['other_prompt']:.2f} "
            f"| {r['untagged']:.2f} |"
        )
    if not any(r[k] for r in calibration["rows"].values() for k in _CALIBRATED):
        rows += [
            "",
            "**The judge scored every answer 0**: it is not grading (an error printed above, or "
            "replies that are not read as scores: see judging.Judge)",
        ]
    elif calibration["warnings"]:
        rows += [
            "",
            "**The judge does not tell these apart** (JUDGE_ID, or its rubric, needs a look): "
            + "; ".join(calibration["warnings"]),
        ]
    return "\n".join(rows)


@dataclasses.dataclass
class DomainScores:
    """One stage's evaluation: per domain, and over all domains."""

    name: str
    # domain -> {"n", "prompts", "format", "under_limit", "tokens_p50", "tokens_p90", "truncated",
    # "judged", "judged_ci", "accuracy"}, and "sampled", "sampled_ci" where sampled answers were
    # judged too
    rows: dict[str, dict[str, float]]

    def summary(self) -> dict[str, Any]:
        return {"name": self.name, "domains": self.rows}


def evaluate(
    loaded: LoadedModel,
    tasks: Sequence[Mapping[str, str]],
    judge: Judge,
    *,
    name: str,
    config: evaluation.EvalConfig,
    output_dir: str | pathlib.Path | None = None,
    samples: int = 0,
    sampling: evaluation.EvalConfig | None = None,
    route: Callable[[Mapping[str, str]], str] | None = None,
    use: Callable[[str], None] | None = None,
) -> DomainScores:
    """Greedy answers to ``tasks`` (records with ``domain``, ``prompt``, ``answer``), judged by
    ``judge`` (:class:`tunixkit.judging.Judge`): per domain and ``all``, the format rate, the share
    under :data:`MAX_ANSWER_TOKENS`, the mean judged score (0..1) with a 95% interval over the
    distinct prompts (``prompts`` of them; :func:`tunixkit.stats.clustered_mean_interval`), and
    math accuracy.

    With ``samples``, each prompt is also answered that many times with ``sampling`` (a temperature)
    and ``sampled`` / ``sampled_ci`` hold the mean judged score of those answers: what a policy
    gradient stage optimises, and a smoother measure than one greedy answer per prompt. The
    completions go to ``output_dir/domains_<name>.jsonl`` (per task: the greedy answer, its score,
    and the mean score of its samples), which :func:`paired_change` compares between stages.

    With ``route`` (task -> the name of a model state) and ``use`` (puts that state in
    ``loaded.model``, e.g. an adapter: :mod:`tunixkit.routing`), the tasks are answered group by
    group, each group after ``use`` of its route, and scored together as one evaluation."""
    if samples and (sampling is None or not sampling.temperature):
        raise ValueError("evaluate: samples > 0 needs a sampling config with a temperature")
    prompts = [loaded.chat.prompt(t["prompt"], config.system_prompt) for t in tasks]
    routes = [route(t) if route else "" for t in tasks]
    gens: list[evaluation.Generation] = [None] * len(tasks)  # type: ignore[list-item]
    groups: list[list[evaluation.Generation]] = [[] for _ in tasks]
    for group in dict.fromkeys(routes):  # each route once, in the order first met
        idx = [i for i, r in enumerate(routes) if r == group]
        if use is not None:
            use(group)
        part = [prompts[i] for i in idx]
        for i, g in zip(
            idx, evaluation.generate(loaded, part, config, progress=False), strict=True
        ):
            gens[i] = g
        if samples:
            made = evaluation.sample_groups(loaded, part, sampling, samples=samples)
            for i, group in zip(idx, made, strict=True):
                groups[i] = group
    texts = [g.text for g in gens]
    questions = [t["prompt"] for t in tasks]
    scores = judge.scores(questions, texts)
    sampled: list[float] = []
    if samples:
        judged = judge.scores(
            [q for q in questions for _ in range(samples)], [g.text for gs in groups for g in gs]
        )
        sampled = [
            sum(judged[i * samples : (i + 1) * samples]) / samples for i in range(len(tasks))
        ]
    rows: dict[str, dict[str, float]] = {}
    for domain in [*sorted({t["domain"] for t in tasks}), "all"]:
        idx = [i for i, t in enumerate(tasks) if domain in ("all", t["domain"])]
        mean, ci, n_prompts = stats.clustered_mean_interval(
            [questions[i] for i in idx], [scores[i] for i in idx]
        )
        row = {
            "n": len(idx),
            "prompts": n_prompts,
            "format": sum(has_format(texts[i]) for i in idx) / len(idx),
            "under_limit": sum(gens[i].num_tokens < MAX_ANSWER_TOKENS for i in idx) / len(idx),
            # the answers' lengths, and the share cut by the generation limit (never closed)
            "tokens_p50": _percentile([gens[i].num_tokens for i in idx], 50),
            "tokens_p90": _percentile([gens[i].num_tokens for i in idx], 90),
            "truncated": sum(gens[i].truncated for i in idx) / len(idx),
            "judged": mean,
            "judged_ci": ci,
        }
        if sampled:
            row["sampled"], row["sampled_ci"], _ = stats.clustered_mean_interval(
                [questions[i] for i in idx], [sampled[i] for i in idx]
            )
        math_idx = [i for i in idx if tasks[i]["domain"] == "math"]
        if math_idx:
            row["accuracy"] = sum(
                is_correct(texts[i], tasks[i]["answer"], strict=True) for i in math_idx
            ) / len(math_idx)
        rows[domain] = row
    if output_dir is not None:
        path = pathlib.Path(output_dir) / f"domains_{name}.jsonl"
        path.write_text(
            "".join(
                json.dumps(
                    {"domain": t["domain"], "prompt": t["prompt"], "completion": c, "judged": s}
                    | ({"sampled": sampled[i]} if sampled else {})
                )
                + "\n"
                for i, (t, c, s) in enumerate(zip(tasks, texts, scores, strict=True))
            )
        )
    return DomainScores(name, rows)


def paired_change(
    output_dir: str | pathlib.Path, before: str, after: str, key: str = "judged"
) -> dict[str, tuple[float, float, int]]:
    """Per domain and ``all``: (mean change, half-width of its 95% interval, distinct prompts) of
    ``key`` ("judged" or "sampled") from evaluation ``before`` to ``after``, paired prompt by prompt
    (read from their ``domains_<name>.jsonl``). Pairing removes how hard each prompt is, so a
    stage's own effect shows with a far narrower interval than the difference of two means.

    >>> import tempfile; d = pathlib.Path(tempfile.mkdtemp())
    >>> for n, xs in (("a", [0.1, 0.5, 0.2]), ("b", [0.3, 0.6, 0.4])):
    ...     _ = (d / f"domains_{n}.jsonl").write_text("".join(
    ...         json.dumps({"domain": "x", "prompt": str(i), "judged": x}) + "\\n"
    ...         for i, x in enumerate(xs)))
    >>> [round(v, 3) for v in paired_change(d, "a", "b")["all"]]
    [0.167, 0.143, 3]
    """
    runs = [
        [
            json.loads(line)
            for line in (pathlib.Path(output_dir) / f"domains_{n}.jsonl").read_text().splitlines()
        ]
        for n in (before, after)
    ]
    if [r["prompt"] for r in runs[0]] != [r["prompt"] for r in runs[1]]:
        raise ValueError(f"paired_change: {before} and {after} were evaluated on different prompts")
    out = {}
    for domain in [*sorted({r["domain"] for r in runs[0]}), "all"]:
        idx = [i for i, r in enumerate(runs[0]) if domain in ("all", r["domain"])]
        out[domain] = stats.clustered_mean_interval(
            [runs[0][i]["prompt"] for i in idx], [runs[1][i][key] - runs[0][i][key] for i in idx]
        )
    return out


def stage_changes(
    output_dir: str | pathlib.Path,
    names: Sequence[str],
    *,
    against: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Each stage's own effect: :func:`paired_change` from each evaluation in ``names`` to the next
    (or, with ``against``, from ``against[name]`` to each ``name`` it holds: the model a stage
    started from), for greedy (``judged``) and, where evaluated, ``sampled`` scores; keyed
    ``"<before>-><after>"``."""
    out: dict[str, dict[str, Any]] = {}
    pairs = (
        itertools.pairwise(names)
        if against is None
        else [(against[n], n) for n in names if n in against]
    )
    for before, after in pairs:
        firsts = [
            json.loads(
                (pathlib.Path(output_dir) / f"domains_{n}.jsonl").read_text().split("\n", 1)[0]
            )
            for n in (before, after)
        ]
        keys = ["judged"] + (["sampled"] if all("sampled" in f for f in firsts) else [])
        out[f"{before}->{after}"] = {k: paired_change(output_dir, before, after, k) for k in keys}
    return out


def changes_table(changes: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown: one row per domain, each stage's paired change (95% CI) in greedy / sampled score
    (greedy alone where a stage was not sampled); a note when there is no stage to compare yet."""
    steps = list(changes)
    if not steps:
        return "*(one evaluation so far: no stage to compare)*"
    rows = [
        "| domain | " + " | ".join(f"{s}: greedy / sampled" for s in steps) + " |",
        "|---|" + "---|" * len(steps),
    ]
    for domain in next(iter(changes.values()))["judged"]:
        cells = [
            " / ".join(f"{v[domain][0]:+.2f} (±{v[domain][1]:.2f})" for v in changes[s].values())
            for s in steps
        ]
        rows.append(f"| {domain} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _cell(text: str, limit: int = 240) -> str:
    text = text if len(text) <= limit else text[:limit] + " …"
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("\n", "<br>")
    )


def side_by_side(output_dir: str | pathlib.Path, names: Sequence[str], per_domain: int = 1) -> str:
    """Markdown: the first ``per_domain`` held-out prompts of each domain with the answers (and
    judged scores) of the evaluations ``names``, read from ``domains_<name>.jsonl``."""
    runs = [
        [
            json.loads(line)
            for line in (pathlib.Path(output_dir) / f"domains_{n}.jsonl").read_text().splitlines()
        ]
        for n in names
    ]
    rows = ["| domain | prompt | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    seen: collections.Counter = collections.Counter()
    for i, first in enumerate(runs[0]):
        if seen[first["domain"]] < per_domain:
            seen[first["domain"]] += 1
            answers = " | ".join(
                f"{_cell(r[i]['completion'])} *({r[i]['judged']:.2f})*" for r in runs
            )
            rows.append(f"| {first['domain']} | {_cell(first['prompt'])} | {answers} |")
    return "\n".join(rows)


def _percentile(values: Sequence[int], q: float) -> float:
    """The ``q``-th percentile (linear interpolation, numpy's default).

    >>> _percentile([10, 20, 30, 40], 50), _percentile([10, 20, 30, 40], 90)
    (25.0, 37.0)
    """
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q))


def length_table(stages: Sequence[DomainScores], limit: int | None = None) -> str:
    """Markdown: per domain and stage, the answers' median and 90th-percentile length in tokens
    and the share truncated (cut by the generation limit ``limit``, never closed): length control
    at a glance, the answers the judges read being under 1K tokens.

    >>> row = {"tokens_p50": 180.0, "tokens_p90": 420.5, "truncated": 0.125}
    >>> print(length_table([DomainScores("sft", {"code": row, "all": row})], limit=768))
    | domain | sft: tokens p50 / p90 | truncated at 768 |
    |---|---|---|
    | code | 180 / 420 | 12% |
    | all | 180 / 420 | 12% |
    """
    cut = f"truncated at {limit}" if limit else "truncated"
    head = "| domain | " + " | ".join(f"{s.name}: tokens p50 / p90 | {cut}" for s in stages) + " |"
    rows = [head, "|---|" + "---|---|" * len(stages)]
    for domain in stages[0].rows:
        cells = []
        for s in stages:
            row = s.rows[domain]
            cells.append(
                f"{row['tokens_p50']:.0f} / {row['tokens_p90']:.0f} | {row['truncated']:.0%}"
            )
        rows.append(f"| {domain} | {' | '.join(cells)} |")
    return "\n".join(rows)


def table(stages: Sequence[DomainScores]) -> str:
    """Markdown: one row per domain, the judged score (95% CI) and format rate of every stage, and
    the mean judged score of sampled answers where the evaluations have one."""
    sampled = all("sampled" in s.rows["all"] for s in stages)
    per = "judged (95% CI) | sampled | format" if sampled else "judged (95% CI) | format"
    head = "| domain | " + " | ".join(f"{s.name}: {per}" for s in stages) + " |"
    rows = [head, "|---|" + ("---|" * per.count("|") + "---|") * len(stages)]
    for domain in stages[0].rows:
        cells = []
        for s in stages:
            row = s.rows[domain]
            cells.append(
                f"{row['judged']:.2f} (±{row['judged_ci']:.2f})"
                + (f" | {row['sampled']:.2f} (±{row['sampled_ci']:.2f})" if sampled else "")
                + f" | {row['format']:.2f}"
            )
        rows.append(f"| {domain} | {' | '.join(cells)} |")
    math_acc = [s.rows.get("math", {}).get("accuracy") for s in stages]
    if all(a is not None for a in math_acc):
        empty = " |" * per.count("|")  # the stage's other columns
        rows.append("| math accuracy |" + "".join(f" {a:.2f} |{empty}" for a in math_acc))
    return "\n".join(rows)


def plot(
    stages: Sequence[DomainScores], path: str | pathlib.Path, title: str = "Judged score by domain"
) -> Figure:
    """Grouped bars: the judged score (95% CI) per domain, one bar per stage, for greedy answers and
    (a second panel, where evaluated) sampled ones; saved as PNG."""
    import matplotlib.pyplot as plt
    import numpy as np

    domains = [d for d in stages[0].rows if d != "all"] + ["all"]
    keys = ["judged"] + (["sampled"] if all("sampled" in s.rows["all"] for s in stages) else [])
    x = np.arange(len(domains))
    width = 0.8 / len(stages)
    fig, axes = plt.subplots(
        len(keys), 1, figsize=(2.4 + 1.2 * len(domains), 3.4 * len(keys)), squeeze=False
    )
    for ax, key in zip(axes[:, 0], keys, strict=True):
        for k, s in enumerate(stages):
            mean = np.array([s.rows[d][key] for d in domains])
            ci = np.nan_to_num([s.rows[d][f"{key}_ci"] for d in domains])  # one prompt: none drawn
            yerr = [np.minimum(ci, mean), np.minimum(ci, 1 - mean)]  # kept within 0..1
            ax.bar(
                x + (k - (len(stages) - 1) / 2) * width,
                mean,
                width,
                yerr=yerr,
                capsize=3,
                label=s.name,
            )
        ax.set_xticks(x, domains)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("judged score (0..1)")
        greedy = title + (" (greedy answers)" if len(keys) > 1 else "")
        ax.set_title(greedy if key == "judged" else "Mean judged score of sampled answers")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars
    fig.tight_layout()
    runlog.save_figure(fig, path)
    return fig
