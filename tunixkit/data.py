"""GSM8K-style math data: one record schema, file and hub loaders, SFT pairs, GRPO batches.

Every source becomes a list of records ``{"question", "solution", "answer"}`` (``answer`` is the
canonical numeric string, ``solution`` the worked steps without GSM8K's ``<<calc>>`` notes).

Sources: Hugging Face ``openai/gsm8k`` (``datasets``), TFDS ``gsm8k``, the Kaggle CSV
(``kagglehub``), or a local ``.jsonl`` / ``.json`` / ``.csv`` / ``.parquet`` file. A malformed file
names the file and line; rows without a parseable answer are counted in a :class:`LoadReport` and
printed, never dropped silently.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import pathlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tunixkit import runtime
from tunixkit.answers import format_number, last_boxed, parse_number
from tunixkit.prompting import MATH_SYSTEM_PROMPT, format_completion, format_prompt

if TYPE_CHECKING:
    import grain
    import numpy as np

__all__ = [
    "DataError",
    "LoadReport",
    "columns",
    "grpo_dataset",
    "load_math",
    "load_rows",
    "sft_pair",
    "spread",
]

KAGGLE_GSM8K = "thedevastator/grade-school-math-8k-q-a"
_CALC_RE = re.compile(r"<<[^>]*>>")
Record = dict[str, str]


class DataError(ValueError):
    """A data file or row is not what the loader expects."""


GSM8K_COLUMNS = ("question", "answer")  # what a local GSM8K-style file must have


def spread(n: int, share: float) -> list[bool]:
    """Which of ``n`` items make up ``share`` of them (``round(share * n)``), spread evenly, each at
    the end of its stretch.

    >>> [int(x) for x in spread(6, 0.5)], sum(spread(90, 0.7))
    ([0, 1, 0, 1, 0, 1], 63)
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"a share must be between 0 and 1, got {share}")
    k = round(share * n)
    return [(i + 1) * k // n != i * k // n for i in range(n)]


def parse_gsm8k_answer(text: str) -> tuple[str, str | None]:
    """Split a GSM8K answer field into (solution steps, canonical answer or None).

    >>> parse_gsm8k_answer("He has 3+4=<<3+4=7>>7 pens.\\n#### 1,007")
    ('He has 3+4=7 pens.', '1007')
    >>> parse_gsm8k_answer("no final line")
    ('no final line', None)
    """
    steps, sep, final = (text or "").rpartition("####")
    if not sep:
        return _CALC_RE.sub("", text or "").strip(), None
    value = parse_number(final)
    return _CALC_RE.sub("", steps).strip(), None if value is None else format_number(value)


@dataclasses.dataclass
class LoadReport:
    """What a loader read and what it could not use (with reasons and row numbers)."""

    source: str
    kept: int = 0
    skipped: list[tuple[int, str]] = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        msg = f"{self.source}: {self.kept} records"
        if self.skipped:
            first = "; ".join(f"row {i}: {why}" for i, why in self.skipped[:3])
            msg += (
                f", {len(self.skipped)} skipped ({first}{' ...' if len(self.skipped) > 3 else ''})"
            )
        return msg


def to_records(
    rows: Iterable[Mapping[str, Any]], source: str, *, verbose: bool = True
) -> tuple[list[Record], LoadReport]:
    """Map raw GSM8K rows (``question``/``answer`` with ``####``) to records, with a report.

    Rows that already hold ``question``/``solution``/``answer`` are kept as they are.
    """
    records: list[Record] = []
    report = LoadReport(source)
    for i, row in enumerate(rows, start=1):
        row = {str(k).strip().lower(): v for k, v in row.items()}
        question = _text(row.get("question"))
        if not question:
            report.skipped.append((i, "empty or missing 'question'"))
            continue
        if "solution" in row and row.get("answer") not in (None, ""):
            value = parse_number(_text(row["answer"]))
            solution, answer = (
                _text(row["solution"]),
                None if value is None else format_number(value),
            )
        else:
            solution, answer = parse_gsm8k_answer(_text(row.get("answer")))
        if answer is None:
            report.skipped.append((i, "no parseable '#### <number>' answer"))
            continue
        records.append({"question": question, "solution": solution, "answer": answer})
    report.kept = len(records)
    if verbose:
        print(report)
    return records, report


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    return "" if value is None else str(value).strip()


def _decode(path: pathlib.Path) -> str:
    """The file as UTF-8 text; otherwise a :class:`DataError` naming the line that is not."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DataError(
            f"{path}:{line}: not UTF-8 text (byte {raw[e.start]:#04x} at offset {e.start}); "
            "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from e


def read_rows(path: str | pathlib.Path, required: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Read raw rows from ``.jsonl``, ``.json``, ``.csv`` or ``.parquet``; errors name file and
    line.

    A file without a single row, or one that is not UTF-8 text, is an error too; so is a CSV header
    that lacks one of the ``required`` columns (named in the error with the header found).
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such data file")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = []
        for lineno, line in enumerate(_decode(path).splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(
                    f"{path}:{lineno}: invalid JSON ({e.msg}); expected one object per line"
                ) from e
            if not isinstance(row, dict):
                raise DataError(
                    f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}"
                )
            rows.append(row)
    elif suffix == ".json":
        try:
            rows = json.loads(_decode(path))
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{e.lineno}: invalid JSON ({e.msg})") from e
        if not isinstance(rows, list):
            raise DataError(f"{path}: expected a JSON list of objects, got {type(rows).__name__}")
    elif suffix == ".csv":
        reader = csv.DictReader(io.StringIO(_decode(path), newline=""))
        missing = set(required) - {c.strip().lower() for c in reader.fieldnames or []}
        if reader.fieldnames and missing:
            raise DataError(
                f"{path}:1: header lacks column(s) {sorted(missing)}; found {reader.fieldnames}"
            )
        rows = list(reader)
    elif suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    else:
        raise DataError(
            f"{path}: unsupported extension {suffix!r}; use .jsonl, .json, .csv or .parquet"
        )
    if not rows:
        raise DataError(f"{path}: no records (the file is empty); expected at least one row")
    return rows


def write_jsonl(rows: Iterable[Mapping[str, Any]], path: str | pathlib.Path) -> pathlib.Path:
    """Write rows as JSON lines (UTF-8), creating parent folders. The file appears whole: written
    beside it, then moved into place, so a reader (another process of the run, a later session
    after a kill) never finds it half written."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.partial")
    with part.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(part, path)
    return path


def load_gsm8k(
    split: str = "train", *, source: str = "hf", path: str | None = None, limit: int | None = None
) -> list[Record]:
    """Load GSM8K ``split`` from ``source``: ``"hf"``, ``"tfds"``, ``"kaggle"`` or ``"file"``:
    ``path``, a ``.jsonl``/``.json``/``.csv``/``.parquet`` file or a folder holding a copy of the
    Hugging Face dataset (``main/train-00000-of-00001.parquet``, ``main/test-...``, as attached to
    a Kaggle notebook), where the split's file is found by name."""
    if source == "file":
        if path is None:
            raise ValueError("source='file' needs path=<.jsonl/.json/.csv/.parquet file or folder>")
        path = gsm8k_file(path, split)
        rows: Iterable[Mapping[str, Any]] = read_rows(path, GSM8K_COLUMNS)
        name = str(path)
    elif source == "hf":
        import datasets

        with runtime.downloading(
            "openai/gsm8k from Hugging Face",
            "attach GSM8K (the openai/gsm8k files or a .jsonl/.csv/.parquet with question/answer) "
            "and load it with source='file', path=<its file>",
        ):
            rows = datasets.load_dataset("openai/gsm8k", "main", split=split)
        name = f"openai/gsm8k:{split}"
    elif source == "tfds":
        import tensorflow_datasets as tfds

        rows = tfds.as_numpy(tfds.load("gsm8k", split=split))
        name = f"tfds gsm8k:{split}"
    elif source == "kaggle":
        import kagglehub

        with runtime.downloading(
            f"{KAGGLE_GSM8K} from Kaggle",
            "attach the data set and load its file with source='file'",
        ):
            folder = pathlib.Path(kagglehub.dataset_download(KAGGLE_GSM8K))
        files = sorted(folder.rglob(f"*{split}*.csv"))
        if not files:
            raise DataError(f"{folder}: no CSV whose name contains {split!r} in {KAGGLE_GSM8K}")
        rows, name = read_rows(files[0], GSM8K_COLUMNS), str(files[0])
    else:
        raise ValueError(f"unknown source {source!r}; expected 'hf', 'tfds', 'kaggle' or 'file'")
    records, _ = to_records(rows, name)
    return records[:limit] if limit is not None else records


def gsm8k_file(path: str | pathlib.Path, split: str) -> pathlib.Path:
    """``path`` itself if it is a file, else the one data file for ``split`` under the folder
    ``path`` (``main/<split>-*.parquet`` in the Hugging Face layout; else any ``*<split>*`` data
    file)."""
    path = pathlib.Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such GSM8K file or folder")
    suffixes = (".parquet", ".jsonl", ".json", ".csv")
    found = sorted(p for p in path.rglob(f"{split}-*.parquet") if p.parent.name == "main")
    found = found or sorted(p for p in path.rglob(f"*{split}*") if p.suffix in suffixes)
    if len(found) != 1:
        listed = ", ".join(str(p.relative_to(path)) for p in found) or "none"
        raise DataError(
            f"{path}: expected one GSM8K {split!r} file (main/{split}-00000-of-00001.parquet as on "
            f"the Hugging Face hub, or a .jsonl/.csv/.parquet named after the split); "
            f"found {listed}"
        )
    return found[0]


# MATH-style benchmarks: name -> (Hugging Face id, its subsets, the columns of a row)
MATH_BENCHMARKS = {
    "math500": (
        "HuggingFaceH4/MATH-500",
        (None,),
        ("problem", "solution", "answer", "subject", "level"),
    ),
    "math": (
        "EleutherAI/hendrycks_math",
        (
            "algebra",
            "counting_and_probability",
            "geometry",
            "intermediate_algebra",
            "number_theory",
            "prealgebra",
            "precalculus",
        ),
        ("problem", "solution", "level", "type"),
    ),
}


def load_math(
    benchmark: str = "math500",
    *,
    path: str | pathlib.Path | None = None,
    limit: int | None = None,
    split: str = "test",
) -> list[dict[str, Any]]:
    """The ``split`` problems of a MATH-style ``benchmark`` (:data:`MATH_BENCHMARKS`) as records
    ``{"question", "solution", "answer", "subject", "level"}`` (``answer`` LaTeX, ``level`` 1-5 or
    None), from the Hugging Face hub or ``path``: a copy in the hub's layout (MATH-500's
    ``test.jsonl``; MATH's ``<subject>/test-*.parquet`` and ``<subject>/train-*.parquet``) or one
    ``.jsonl``/``.json``/``.csv``/``.parquet`` file of the same columns. MATH has no answer
    column: its answer is the last ``\\boxed{}`` of the solution. A row without an answer is
    counted and said, never kept. MATH-500 is a test set only: train on ``"math"``'s train split
    (7,500 problems; MATH-500 is drawn from MATH's test split, so the two do not overlap)."""
    if benchmark not in MATH_BENCHMARKS:
        raise ValueError(
            f"unknown benchmark {benchmark!r}; expected one of {list(MATH_BENCHMARKS)}"
        )
    if split not in ("test", "train") or (benchmark == "math500" and split != "test"):
        raise ValueError(
            f"{benchmark} has no {split!r} split: MATH-500 has 'test' only, MATH 'train' and "
            "'test' (train GRPO on MATH's train split)"
        )
    hub_id, subsets, needed = MATH_BENCHMARKS[benchmark]
    parts: list[tuple[str, Iterable[Mapping[str, Any]]]] = []
    if path is not None:
        path = pathlib.Path(path)
        suffixes = (".parquet", ".jsonl", ".json", ".csv")
        files = (
            [path]
            if path.is_file()
            else sorted(p for p in path.rglob(f"*{split}*") if p.suffix in suffixes)
        )
        if not files:
            raise DataError(
                f"{path}: no {benchmark} {split} file (expected {hub_id}'s layout, or one "
                f".jsonl/.json/.csv/.parquet file with columns {list(needed)})"
            )
        parts = [(str(f), read_rows(f, needed)) for f in files]
    else:
        import datasets

        with runtime.downloading(
            f"{hub_id} from Hugging Face",
            f"attach a copy of {hub_id} and load it with path=<its folder or file>",
        ):
            parts = [
                (f"{hub_id}:{sub or split}", datasets.load_dataset(hub_id, sub, split=split))
                for sub in subsets
            ]
    records, skipped = [], 0
    for name, rows in parts:
        for i, row in enumerate(rows, start=1):
            missing = [c for c in needed if c not in row and not (c == "type" and "subject" in row)]
            if missing:
                raise DataError(f"{name}: row {i} lacks {missing}; expected columns {list(needed)}")
            answer = row.get("answer") or last_boxed(str(row.get("solution") or ""))
            if not answer:
                skipped += 1
                continue
            level = re.search(r"\d", str(row.get("level", "")))
            records.append(
                {
                    "question": str(row["problem"]),
                    "solution": str(row.get("solution") or ""),
                    "answer": str(answer),
                    "subject": str(row.get("subject") or row.get("type") or ""),
                    "level": int(level.group()) if level else None,
                }
            )
    if skipped:
        print(f"{benchmark}: {skipped} problem(s) without a boxed answer in the solution, left out")
    return records[:limit] if limit is not None else records


def sft_pair(
    record: Mapping[str, str],
    system_prompt: str | None = MATH_SYSTEM_PROMPT,
    *,
    family: str = "gemma3",
) -> tuple[str, str]:
    """(prompt, target completion) for SFT in ``family``'s chat template: the solution steps
    become the reasoning."""
    return format_prompt(record["question"], system_prompt, family=family), format_completion(
        record["solution"], record["answer"], family=family
    )


def grpo_dataset(
    records: Sequence[Mapping[str, str]],
    *,
    batch_size: int,
    num_batches: int | None = None,
    seed: int = 0,
    system_prompt: str | None = MATH_SYSTEM_PROMPT,
    family: str = "gemma3",
    fit: Callable[[str], str] | None = None,
) -> grain.MapDataset[dict[str, np.ndarray]]:
    """A grain dataset of GRPO batches: dicts of numpy arrays with ``prompts`` (in ``family``'s chat
    template, each passed through ``fit``: :func:`tunixkit.evaluation.prompt_fitter` cuts it to the
    rollout's prompt length), ``question``, ``answer``.

    Shuffled with ``seed`` and repeated as needed so that ``num_batches`` batches exist; the order
    is reproducible, which trainer resume relies on.
    """
    import grain

    items = [
        {
            "prompts": (fit or str)(format_prompt(r["question"], system_prompt, family=family)),
            "question": r["question"],
            "answer": r["answer"],
        }
        for r in records
    ]
    ds = grain.MapDataset.source(items).shuffle(seed=seed)
    if num_batches is not None:
        epochs = -(-num_batches * batch_size // max(len(items), 1))
        ds = ds.repeat(epochs)
    ds = ds.batch(batch_size, drop_remainder=True)
    return ds[:num_batches] if num_batches is not None else ds


def load_rows(
    dataset: str, split: str = "train", *, name: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Rows of any dataset: a local ``.jsonl``/``.json``/``.csv``/``.parquet`` file, or a Hugging
    Face dataset id (``name`` is its config). ``limit``: the first rows only; a Hugging Face split
    is then sliced (``train[:limit]``), never read whole into memory."""
    if pathlib.Path(dataset).suffix in (".jsonl", ".json", ".csv", ".parquet"):
        return read_rows(dataset)[:limit]
    import datasets

    with runtime.downloading(
        f"{dataset} from Hugging Face", "attach it and pass its .jsonl/.csv/.parquet file instead"
    ):
        part = split if limit is None else f"{split}[:{limit}]"
        return [dict(r) for r in datasets.load_dataset(dataset, name, split=part)]


def columns(
    rows: Sequence[Mapping[str, Any]], fields: Sequence[str], *, source: str, verbose: bool = True
) -> list[tuple[str, ...]]:
    """The text of ``fields`` from every row, as tuples (e.g. prompt/response for SFT,
    prompt/chosen/rejected for DPO). A field the dataset lacks raises :class:`DataError` listing the
    columns it has; rows with an empty field are counted and reported, not silently dropped.

    >>> columns([{"q": "1+1?", "a": "2"}, {"q": "", "a": "3"}], ["q", "a"], source="demo")
    demo: 1 records, 1 skipped (row 2: empty 'q')
    [('1+1?', '2')]
    """
    if rows:
        missing = [f for f in fields if f not in rows[0]]
        if missing:
            raise DataError(f"{source}: no column(s) {missing}; the rows have {sorted(rows[0])}")
    out: list[tuple[str, ...]] = []
    report = LoadReport(source)
    for i, row in enumerate(rows, start=1):
        values = tuple(_chat_text(row.get(f)) for f in fields)
        empty = [f for f, v in zip(fields, values, strict=True) if not v]
        if empty:
            report.skipped.append((i, f"empty {empty[0]!r}"))
            continue
        out.append(values)
    report.kept = len(out)
    if verbose:
        print(report)
    return out


def _chat_text(value: Any) -> str:
    """A field's text; chat-style lists of ``{"role", "content"}`` give their last message."""
    if isinstance(value, list) and value and isinstance(value[-1], Mapping):
        value = value[-1].get("content")
    return _text(value)
