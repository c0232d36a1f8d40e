"""A curation loop across sessions (notebook 08): answer many prompts, keep the good answers, and
write them as a trace file the next session trains on.

Each prompt gets ``samples`` answers from the model (and, with ``with_data``, its own response
from the data as one more candidate). Every candidate is judged and filtered (:class:`Filters`:
finished, in the ``<reasoning>``/``<answer>`` format, long enough, under the judges' 1K-token
limit, not repeating itself, judged at least ``min_score``); the best candidate that passes is the
prompt's curated answer, and a prompt with none is left out (counted by domain and by the first
filter its best candidate failed).

:func:`curate` goes in chunks of prompts and appends each finished prompt, with every candidate and
its verdict, to ``candidates.jsonl``; after each chunk ``curated.jsonl`` is written anew (a
temporary file, then renamed), so that a session killed mid-pass keeps every chunk it finished and
a rerun (or a session with ``RESUME_FROM``) goes on from the next prompt. The session clock (and
``OUTPUT_DIR/STOP``) stops the pass before a chunk that would not end in time.

``curated.jsonl`` has the columns notebook 06's ``TRACES`` reads (``domain``, ``prompt``,
``response``) and its provenance: the model and judge, the judged score, where the answer came
from (``model`` or ``data``) and its tokens.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import pathlib
import shutil
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from tunixkit import answers, data, evaluation, judging, rewards, runlog
from tunixkit.data import DataError

if TYPE_CHECKING:
    from tunixkit.models import LoadedModel
    from tunixkit.session import Clock

__all__ = ["Filters", "curate", "plot", "report", "table"]

# why a candidate is dropped, in the order the filters are applied (the first that fails is named)
REASONS = ("truncated", "format", "too short", "too long", "repetition", "judge score")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Filters:
    """What a kept answer must be (each threshold a notebook parameter)."""

    min_score: float = 0.7  # judged score (0..1) at least
    min_words: int = 1  # words of the answer block at least (1: not empty)
    max_tokens: int = 1000  # tokens at most: the judges read answers under 1K tokens
    max_repeat: float = 0.3  # share of repeated word 3-grams at most (rewards.repetition)
    exact_format: bool = True  # the <reasoning>/<answer> format exactly (rewards.has_format)

    def why_dropped(self, text: str, tokens: int, truncated: bool, score: float) -> str | None:
        """The first filter (:data:`REASONS`) the candidate fails, or None when it is kept.

        >>> f = Filters(min_score=0.5)
        >>> good = "<reasoning>It is so.</reasoning>\\n<answer>Paris is the capital.</answer>"
        >>> f.why_dropped(good, 20, False, 0.9), f.why_dropped(good, 20, False, 0.2)
        (None, 'judge score')
        >>> f.why_dropped("Paris", 2, False, 0.9), f.why_dropped(good, 20, True, 0.9)
        ('format', 'truncated')
        """
        if truncated:
            return "truncated"
        if self.exact_format and not rewards.has_format(text):
            return "format"
        if len(rewards.answer_text(text).split()) < self.min_words:
            return "too short"
        if tokens > self.max_tokens:
            return "too long"
        if -rewards.repetition([""], [text])[0] > self.max_repeat:
            return "repetition"
        if score < self.min_score:
            return "judge score"
        return None


def _read_jsonl(path: pathlib.Path) -> tuple[list[dict[str, Any]], int]:
    """The rows of ``path`` and how many bytes of it are whole lines: a kill while a chunk was
    appended can leave its last line cut, which is dropped (and said); any other bad line is an
    error naming it."""
    if not path.is_file():
        return [], 0
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    rows, good = [], 0
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            good += len(line) + 1
            continue
        if n == len(lines):  # the last line, without its newline: a cut append, even if it parses
            print(f"{path}: its last line was cut (a killed session); that prompt is redone")
            break
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise DataError(f"{path}, line {n}: not a JSON object ({e})") from e
        good += len(line) + 1
    return rows, min(good, len(raw))


def read_candidates(folder: str | pathlib.Path) -> list[dict[str, Any]]:
    """Every finished prompt of a curation pass in ``folder`` (``candidates.jsonl``), in order."""
    return _read_jsonl(pathlib.Path(folder) / "candidates.jsonl")[0]


def _curated_rows(done: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for d in done:
        kept = [c for c in d["candidates"] if c["dropped"] is None]
        if kept:
            best = max(kept, key=lambda c: c["score"])
            rows.append(
                {
                    "domain": d["domain"],
                    "prompt": d["prompt"],
                    "response": best["text"],
                    "score": best["score"],
                    "source": best["source"],
                    "tokens": best["tokens"],
                    "model": d["model"],
                    "judge": d["judge"],
                }
            )
    return rows


def curate(
    loaded: LoadedModel,
    tasks: Sequence[Mapping[str, str]],
    judge: judging.Judge,
    config: evaluation.EvalConfig,
    folder: str | pathlib.Path,
    *,
    samples: int,
    filters: Filters,
    model: str,
    judged_by: str,
    with_data: bool = True,
    clock: Clock | None = None,
    chunk: int | None = None,
    earlier: str | pathlib.Path | None = None,
) -> list[dict[str, Any]]:
    """Curate ``tasks`` (records with ``domain``, ``prompt`` and, with ``with_data``, their own
    ``response``) into ``folder/curated.jsonl``; returns every finished prompt (as
    :func:`read_candidates`). ``config``: the sampling (a temperature, the system prompt, the
    generation limit); ``model`` and ``judged_by``: the names written as the answers'
    provenance. Prompts already in ``folder/candidates.jsonl`` are not answered again; one that
    differs from the task at its place is an error (another pass's folder). ``earlier``: a
    previous session's pass folder (read-only is fine), whose prompts count as done when
    ``folder`` has none yet. Every candidate read back is filtered again with ``filters``: a later
    session may change a threshold without sampling again."""
    if samples < 1 and not with_data:
        raise ValueError("curate: no candidates (samples 0 and with_data False)")
    if samples and not config.temperature:
        raise ValueError("curate: sampling several answers needs a temperature above 0")
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "candidates.jsonl"
    before = pathlib.Path(earlier) / "candidates.jsonl" if earlier else None
    if not path.is_file() and before is not None:
        if not before.is_file():
            raise DataError(
                f"{before}: no curation pass to continue (RESUME_FROM names the OUTPUT_DIR of the "
                "session before, the folder holding curated/candidates.jsonl)"
            )
        shutil.copyfile(before, path)
        print(f"curation: continuing the pass of {before.parent}")
    done, whole = _read_jsonl(path)
    if path.is_file() and whole < path.stat().st_size:
        with path.open("r+b") as f:
            f.truncate(whole)  # the cut line goes; its prompt is answered again
    for n, d in enumerate(done):
        if n >= len(tasks) or d["prompt"] != tasks[n]["prompt"]:
            raise DataError(
                f"{path}, line {n + 1}: its prompt is not task {n + 1} of this pass (another "
                f"pass's folder, or other prompts): curate into a new folder or remove it"
            )
    for d in done:
        for c in d["candidates"]:
            c["dropped"] = filters.why_dropped(c["text"], c["tokens"], c["truncated"], c["score"])
    if done:
        print(f"curation: {len(done)} of {len(tasks)} prompts were done by an earlier run")
    chunk = chunk or max(1, 4 * config.batch_size // max(1, samples))
    sampler = evaluation.make_sampler(
        loaded, config.max_prompt_length + config.max_generation_steps
    )
    todo = range(len(done), len(tasks), chunk)
    started, chunks = time.time(), 0
    bar = tqdm(total=len(tasks), initial=len(done), desc="curating", unit="prompt")
    for i in todo:
        per_chunk = (time.time() - started) / max(1, chunks)
        if clock is not None and (
            (chunks and clock.must_stop(per_chunk)) or clock.stop_file.is_file()
        ):
            why = "OUTPUT_DIR/STOP" if clock.stop_file.is_file() else "the session clock"
            print(
                f"curation: {why} stopped the pass after {len(done)} of {len(tasks)} prompts "
                "(a rerun, or a session with RESUME_FROM, goes on from there)"
            )
            break
        part = tasks[i : i + chunk]
        prompts = [loaded.chat.prompt(t["prompt"], config.system_prompt) for t in part]
        groups = (
            evaluation.sample_groups(loaded, prompts, config, samples=samples, sampler=sampler)
            if samples
            else [[] for _ in part]
        )
        cands = [
            [{"source": "model", "text": g.text, "tokens": g.num_tokens, "truncated": g.truncated}]
            for group in groups
            for g in group
        ]
        per_task: list[list[dict[str, Any]]] = [
            [c for [c] in cands[k * samples : (k + 1) * samples]] for k in range(len(part))
        ]
        if with_data:
            for t, cs in zip(part, per_task, strict=True):
                text = t["response"].removesuffix(loaded.chat.end_of_turn).strip()
                tokens = len(loaded.tokenizer.encode(text))
                cs.append({"source": "data", "text": text, "tokens": tokens, "truncated": False})
        questions = [t["prompt"] for t, cs in zip(part, per_task, strict=True) for _ in cs]
        scores = judge.scores(questions, [c["text"] for cs in per_task for c in cs])
        flat = [c for cs in per_task for c in cs]
        for c, s in zip(flat, scores, strict=True):
            c["score"] = float(s)
            c["dropped"] = filters.why_dropped(c["text"], c["tokens"], c["truncated"], c["score"])
        lines = []
        for t, cs in zip(part, per_task, strict=True):
            row = {"domain": t["domain"], "prompt": t["prompt"], "model": model}
            row |= {"judge": judged_by, "candidates": cs}
            if "answer" in t:
                row["answer"] = t["answer"]
            lines.append(row)
        with path.open("a") as f:  # one write per chunk: a kill cuts one line at most
            f.write("".join(json.dumps(r) + "\n" for r in lines))
            f.flush()
            os.fsync(f.fileno())
        done += lines
        data.write_jsonl(_curated_rows(done), folder / "curated.jsonl")
        chunks += 1
        bar.update(len(part))
    bar.close()
    data.write_jsonl(_curated_rows(done), folder / "curated.jsonl")
    return done


def report(done: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What a pass kept: per domain and ``all``, prompts done, prompts kept and their share, the
    mean judged score of the kept answers and of the dropped candidates; why the prompts left out
    were (the first filter their best candidate failed); where the kept answers came from; on math
    prompts with a reference answer, the accuracy of kept answers and of dropped ones (a check of
    the judge that does not use it)."""
    by_domain: dict[str, dict[str, Any]] = {}
    why: collections.Counter[str] = collections.Counter()
    sources: collections.Counter[str] = collections.Counter()
    acc: dict[str, list[bool]] = {"kept": [], "dropped": []}
    for domain in [*sorted({d["domain"] for d in done}), "all"]:
        rows = [d for d in done if domain in ("all", d["domain"])]
        kept_scores, dropped_scores, kept = [], [], 0
        for d in rows:
            passing = [c for c in d["candidates"] if c["dropped"] is None]
            best = max(passing, key=lambda c: c["score"]) if passing else None
            kept += best is not None
            kept_scores += [best["score"]] if best else []
            dropped_scores += [c["score"] for c in d["candidates"] if c["dropped"] is not None]
            if domain != "all":
                continue
            if best is None:
                top = max(d["candidates"], key=lambda c: c["score"])
                why[top["dropped"]] += 1
            else:
                sources[best["source"]] += 1
            if d["domain"] == "math" and "answer" in d:
                if best is not None:
                    acc["kept"].append(answers.is_correct(best["text"], d["answer"], strict=True))
                acc["dropped"] += [
                    answers.is_correct(c["text"], d["answer"], strict=True)
                    for c in d["candidates"]
                    if c["dropped"] is not None
                ]
        by_domain[domain] = {
            "prompts": len(rows),
            "kept": kept,
            "kept_share": kept / len(rows) if rows else 0.0,
            "kept_judged": sum(kept_scores) / len(kept_scores) if kept_scores else None,
            "dropped_judged": (
                sum(dropped_scores) / len(dropped_scores) if dropped_scores else None
            ),
        }
    out: dict[str, Any] = {
        "domains": by_domain,
        "left_out_because": dict(why),
        "kept_from": dict(sources),
    }
    if acc["kept"] or acc["dropped"]:
        out["math_accuracy"] = {k: (sum(v) / len(v) if v else None, len(v)) for k, v in acc.items()}
    return out


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(summary: Mapping[str, Any]) -> str:
    """Markdown of :func:`report`: one row per domain.

    >>> print(table({"domains": {"all": {"prompts": 4, "kept": 1, "kept_share": 0.25,
    ...     "kept_judged": 0.9, "dropped_judged": None}}, "left_out_because": {"format": 3},
    ...     "kept_from": {"data": 1}}))
    | domain | prompts | kept | kept share | judged, kept | judged, dropped |
    |---|---|---|---|---|---|
    | all | 4 | 1 | 25% | 0.90 | - |
    <BLANKLINE>
    Prompts left out, by the first filter their best answer failed: format 3. From: data 1.
    """
    lines = [
        "| domain | prompts | kept | kept share | judged, kept | judged, dropped |",
        "|---|---|---|---|---|---|",
    ]
    for domain, r in summary["domains"].items():
        lines.append(
            f"| {domain} | {r['prompts']} | {r['kept']} | {r['kept_share']:.0%} | "
            f"{_fmt(r['kept_judged'])} | {_fmt(r['dropped_judged'])} |"
        )
    why = ", ".join(f"{k} {v}" for k, v in summary["left_out_because"].items()) or "none"
    came = ", ".join(f"{k} {v}" for k, v in summary["kept_from"].items()) or "none"
    tail = f"Prompts left out, by the first filter their best answer failed: {why}. "
    tail += f"From: {came}."
    if "math_accuracy" in summary:
        (ka, kn), (da, dn) = summary["math_accuracy"]["kept"], summary["math_accuracy"]["dropped"]
        tail += f" Math accuracy: kept {_fmt(ka)} ({kn}), dropped {_fmt(da)} ({dn})."
    return "\n".join(lines) + "\n\n" + tail


def plot(done: Sequence[Mapping[str, Any]], path: str | pathlib.Path, title: str = "") -> Any:
    """Two panels: the kept share per domain, and the judged scores of kept and dropped
    candidates (their histograms); saved to ``path``."""
    import matplotlib.pyplot as plt

    summary = report(done)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6))
    names = [d for d in summary["domains"] if d != "all"]
    left.bar(names, [summary["domains"][d]["kept_share"] for d in names], color="tab:green")
    left.set_ylim(0, 1)
    left.set_ylabel("prompts kept")
    left.set_title("kept share by domain")
    left.tick_params(axis="x", labelrotation=30)
    kept = [c["score"] for d in done for c in d["candidates"] if c["dropped"] is None]
    dropped = [c["score"] for d in done for c in d["candidates"] if c["dropped"] is not None]
    bins = [i / 20 for i in range(21)]
    right.hist(dropped, bins=bins, alpha=0.6, label=f"dropped ({len(dropped)})", color="tab:red")
    right.hist(kept, bins=bins, alpha=0.6, label=f"passed ({len(kept)})", color="tab:green")
    right.set_xlabel("judged score")
    right.set_ylabel("candidates")
    right.set_title("judged score of every candidate")
    right.legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    runlog.save_figure(fig, path)
    return fig
