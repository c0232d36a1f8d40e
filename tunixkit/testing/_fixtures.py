"""Helpers for tunixkit's own tests and the full profile's rehearsal in CI.

- :func:`randomize_all`: every weight of a model random (tunix initialises norms and MLPs to zero,
  which would hide a wrong tensor mapping in a load/export test);
- :func:`logits`: a model's logits on a fixed causal batch;
- :func:`notebook_script`: a notebook's py:percent source as a script with parameters injected after
  its ``parameters`` cell, as papermill does; the tests run it as a plain process they can SIGKILL;
- :func:`load_orbax_export`: an Orbax export loaded with tunix's own classes only, as the
  competition's judges load it (notebook 02 shows the same steps in a cell);
- :func:`kernel_python`: a Python with this one's packages but without tunixkit, like Kaggle's image
  (the notebooks' install cell then installs tunixkit into it);
- :func:`write_gsm8k_hub`, :func:`write_trace_rows`, :func:`write_preference_rows`: small files in
  the real data sets' on-disk layout and schema (GSM8K as the Hugging Face hub lays it out, SFT
  traces, preference pairs), for the full profile's loaders in CI;
- :class:`ScriptedClock`: a session clock whose stop and pace are scripted (events, not seconds);
- :func:`write_hf_tokenizer`: a SentencePiece BPE model as a Hugging Face ``tokenizer.json`` folder
  (the other layout Gemma checkpoints ship), for the tests of that path.
"""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from tunixkit import data
from tunixkit.testing._synthetic import SMOKE_MAX_OPERAND, SPLIT_SEEDS, synthetic_gsm8k

__all__ = [
    "ScriptedClock",
    "kernel_python",
    "load_orbax_export",
    "logits",
    "notebook_script",
    "randomize_all",
    "write_gsm8k_hub",
    "write_chat_traces",
    "write_hf_tokenizer",
    "write_mix_sources",
    "write_preference_rows",
    "write_trace_rows",
]


@dataclasses.dataclass
class ScriptedClock:
    """A session clock (:class:`tunixkit.session.Clock`) whose answers are scripted, not timed:
    it says stop at its ``stop_at``-th question (None: never), and that ``more_steps`` further steps
    fit whatever the pace (None: no limit); ``limit``: the seconds left it reports (a pass asks a
    clock only when it has a limit). ``paces`` keeps the paces it was asked about."""

    stop_at: int | None = None
    more_steps: int | None = None
    limit: float = float("inf")
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    rehearsal: Any = None
    stop_file: pathlib.Path = pathlib.Path("STOP")  # never read: stop_requested says no
    asked: int = 0
    paces: list[float] = dataclasses.field(default_factory=list)

    def elapsed(self) -> float:
        return 0.0

    def remaining(self) -> float:
        return self.limit

    def reserve(self) -> float:
        return 0.0

    def must_stop(self, next_step_seconds: float = 0.0) -> bool:
        self.asked += 1
        return self.stop_at is not None and self.asked >= self.stop_at

    def stop_requested(self, steps: int) -> bool:
        return False

    def steps_that_fit(self, seconds_per_step: float) -> int | None:
        self.paces.append(seconds_per_step)
        return self.more_steps

    def record(self, name: str, seconds: float) -> None:
        self.timings[name] = float(seconds)


def randomize_all(model, seed: int = 1, *, scale: float = 0.1, norm_scale: float | None = None):
    """Set every ``nnx.Param`` (and LoRA param) of ``model`` to Gaussian noise, in place."""
    import jax
    from flax import nnx

    key = jax.random.key(seed)
    for path, v in nnx.iter_graph(model):
        if isinstance(v, nnx.Param | nnx.LoRAParam):
            key, sub = jax.random.split(key)
            s = norm_scale if norm_scale is not None and path[-1] == "scale" else scale
            v.value = (s * jax.random.normal(sub, v.value.shape)).astype(v.value.dtype)
    return model


def logits(model, tokens: np.ndarray | None = None) -> np.ndarray:
    """float32 logits of ``model`` on ``tokens`` (default: ids 2..13), full causal attention."""
    from tunix.sft import utils as su

    toks = (
        np.arange(2, 14, dtype=np.int32)[None] if tokens is None else np.asarray(tokens, np.int32)
    )
    mask = np.ones_like(toks, dtype=bool)
    out, _ = model(toks, su.build_positions_from_mask(mask), None, su.make_causal_attn_mask(mask))
    return np.asarray(out, dtype=np.float32)


def notebook_script(
    notebook: str | pathlib.Path, params: Mapping[str, Any], out: str | pathlib.Path
) -> pathlib.Path:
    """Write ``notebook`` (``NN_name.py``) to ``out`` with ``params`` assigned right after its
    ``parameters`` cell (papermill's injected-parameters cell); returns ``out``."""
    lines = pathlib.Path(notebook).read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(
        i for i, line in enumerate(lines) if line.startswith("# %%") and "parameters" in line
    )
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("# %%")), len(lines))
    injected = ["# %% injected parameters\n", *(f"{k} = {v!r}\n" for k, v in params.items()), "\n"]
    out = pathlib.Path(out)
    out.write_text("".join(lines[:end] + injected + lines[end:]), encoding="utf-8")
    return out


def load_orbax_export(folder: str | pathlib.Path):
    """The model in an Orbax export (``models.export``'s ``orbax/``), built with tunix's own
    model class and config from ``tunix_config.json`` and restored with Orbax: no tunixkit code."""
    import importlib
    import json

    import orbax.checkpoint as ocp
    from flax import nnx

    folder = pathlib.Path(folder)
    meta = json.loads((folder / "tunix_config.json").read_text())
    arch = importlib.import_module(meta["module"])

    def value(v: Any) -> Any:
        if isinstance(v, dict):
            return getattr(arch, v["enum"])[v["name"]]
        return tuple(value(x) for x in v) if isinstance(v, list) else v

    fields = {k: value(v) for k, v in meta["config"].items()}
    if "param_dtype" in fields:
        fields["param_dtype"] = np.dtype(fields["param_dtype"])
    config = arch.ModelConfig(**fields)
    graph, state = nnx.split(
        nnx.eval_shape(lambda: getattr(arch, meta["model_class"])(config, rngs=nnx.Rngs(0)))
    )
    return nnx.merge(graph, ocp.StandardCheckpointer().restore(folder / "params", state))


def write_hf_tokenizer(
    sentencepiece_model: str | pathlib.Path, folder: str | pathlib.Path
) -> pathlib.Path:
    """Write ``sentencepiece_model`` (BPE, identity normalization, no dummy prefix, split digits:
    the smoke tokenizer's settings) to ``folder`` as a Hugging Face fast tokenizer
    (``tokenizer.json``, ``tokenizer_config.json``); returns ``folder``. The vocabulary and ids are
    the SentencePiece model's: control pieces are special tokens, user-defined ones added tokens,
    merges ranked by piece id as SentencePiece's BPE ranks them; encoding with special tokens
    prepends BOS, as Gemma's ``tokenizer.json`` does."""
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import SentencePieceExtractor

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(pathlib.Path(sentencepiece_model).read_bytes())
    spec, norm = proto.trainer_spec, proto.normalizer_spec
    settings = (spec.model_type, norm.name, norm.add_dummy_prefix, spec.byte_fallback)
    if settings != (2, "identity", False, False):  # 2: BPE
        raise ValueError(
            f"{sentencepiece_model}: only BPE with identity normalization, no dummy prefix "
            "and no byte fallback is converted"
        )
    pieces = SentencePieceExtractor(str(sentencepiece_model)).extract(models.BPE)
    tok = Tokenizer(
        models.BPE(
            vocab=pieces["vocab"],
            merges=pieces["merges"],
            unk_token=proto.pieces[spec.unk_id].piece,
            fuse_unk=True,
        )
    )
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    if spec.split_digits:
        tok.pre_tokenizer = pre_tokenizers.Digits(individual_digits=True)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.Fuse()])
    tok.add_special_tokens(
        [AddedToken(p.piece, normalized=False, special=True) for p in proto.pieces if p.type == 3]
    )
    tok.add_tokens([AddedToken(p.piece, normalized=False) for p in proto.pieces if p.type == 4])
    name = {i: proto.pieces[i].piece for i in (spec.bos_id, spec.eos_id, spec.pad_id, spec.unk_id)}
    bos = name[spec.bos_id]  # as Gemma's tokenizer.json: encoding prepends <bos>
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, spec.bos_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=name[spec.bos_id],
        eos_token=name[spec.eos_id],
        pad_token=name[spec.pad_id],
        unk_token=name[spec.unk_id],
    )
    fast.save_pretrained(str(folder))
    return pathlib.Path(folder)


def kernel_python(folder: str | pathlib.Path) -> str:
    """A new Python (a venv in ``folder``) that sees this Python's site-packages but not an editable
    tunixkit, as Kaggle's image has jax, tunix and friends but no tunixkit."""
    import importlib.util
    import subprocess
    import sys

    folder = pathlib.Path(folder)
    jax = importlib.util.find_spec("jax")
    if jax is None or jax.origin is None:
        raise RuntimeError("kernel_python needs jax installed in this Python")
    site_packages = pathlib.Path(jax.origin).parents[1]
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = next(folder.glob("lib/python*/site-packages"))
    (site / "kaggle_image.pth").write_text(f"{site_packages}\n")  # a path line: no .pth inside runs
    python = str(folder / "bin" / "python")
    probe = subprocess.run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('tunixkit'))"],
        capture_output=True,
        text=True,
        cwd=folder,
    )
    if probe.stdout.strip() != "None":
        raise RuntimeError(f"{python} imports tunixkit already: {probe.stdout}{probe.stderr}")
    return python


def _parquet(rows: list[dict[str, Any]], path: pathlib.Path) -> pathlib.Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def write_gsm8k_hub(
    folder: str | pathlib.Path, *, n_train: int = 64, n_test: int = 16
) -> pathlib.Path:
    """``folder`` as a copy of ``openai/gsm8k`` on the Hugging Face hub (what a Kaggle notebook gets
    when the data set is attached): ``main/{train,test}-00000-of-00001.parquet`` with the columns
    ``question`` and ``answer`` (worked solution, then ``#### <number>``), synthetic rows."""
    folder = pathlib.Path(folder)
    for split, n in (("train", n_train), ("test", n_test)):
        rows = synthetic_gsm8k(n, seed=SPLIT_SEEDS[split])
        _parquet(rows, folder / "main" / f"{split}-00000-of-00001.parquet")
    return folder


MATH_SUBJECTS = (
    "Algebra",
    "Counting & Probability",
    "Geometry",
    "Intermediate Algebra",
    "Number Theory",
    "Prealgebra",
    "Precalculus",
)


SMOKE_MATH_TRAIN = 512  # MATH-style training problems of the smoke profile (MATH's train split)
SMOKE_MATH500 = 48  # and its MATH-500 copy


def synthetic_math(n: int, *, seed: int = 0, word_every: int = 0) -> list[dict[str, Any]]:
    r"""``n`` MATH-style problems with LaTeX answers of the kinds MATH has (a fraction, a radical,
    an interval, a set, a text answer, an ordered pair, an integer): ``problem``, ``solution``
    (ending in ``\boxed{answer}``), ``answer``, ``subject``, ``level`` (1-5). ``word_every``: every
    such row is instead a Prealgebra word problem of the smoke GSM8K kind (numbers up to
    :data:`SMOKE_MAX_OPERAND`), which the smoke warm start partly solves: GRPO on MATH-style data
    then has right answers to reward."""
    rng = np.random.default_rng(seed)
    words = synthetic_gsm8k(n, seed=seed + 100, max_operand=SMOKE_MAX_OPERAND)
    out = []
    for i in range(n):
        if word_every and i % word_every == 0:
            solution, number = (part.strip() for part in words[i]["answer"].rsplit("####", 1))
            out.append(
                {
                    "problem": words[i]["question"],
                    "solution": f"{solution} So the answer is $\\boxed{{{number}}}$.",
                    "answer": number,
                    "subject": "Prealgebra",
                    "level": 1,
                    "unique_id": f"test/synthetic/{i}.json",
                }
            )
            continue
        a, b = (int(x) for x in rng.integers(2, 9, size=2))
        kind = i % 7
        if kind == 0:
            q, ans = f"Simplify $\\frac{{{a * b}}}{{{b * (a + 1)}}}$.", f"\\frac{{{a}}}{{{a + 1}}}"
        elif kind == 1:
            c = (2, 3, 5, 6, 7)[i % 5]  # no square factor: the radical stays
            q, ans = f"Simplify $\\sqrt{{{a * a * c}}}$.", f"{a}\\sqrt{{{c}}}"
        elif kind == 2:
            q, ans = f"Solve ${a} < x \\le {a + b}$ as an interval.", f"({a},{a + b}]"
        elif kind == 3:
            q, ans = (
                f"Which $x$ satisfy $(x-{a})(x-{a + b})=0$? Give the set.",
                f"\\{{{a},{a + b}\\}}",
            )
        elif kind == 4:
            day = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
            q, ans = (
                f"Today is Monday. What day is it in {7 * b + a % 7} days?",
                f"\\text{{{day[a % 7]}}}",
            )
        elif kind == 5:
            q, ans = f"Give the point $(x, y)$ with $x = {a}$ and $y = x + {b}$.", f"({a},{a + b})"
        else:
            q, ans = f"Compute ${a}^2 + {b}$.", str(a * a + b)
        out.append(
            {
                "problem": q,
                "solution": f"Working it through gives $\\boxed{{{ans}}}$.",
                "answer": ans,
                "subject": MATH_SUBJECTS[i % len(MATH_SUBJECTS)],
                "level": 1 + i % 5,
                "unique_id": f"test/synthetic/{i}.json",
            }
        )
    return out


def write_math500(folder: str | pathlib.Path, n: int = 24, *, word_every: int = 0) -> pathlib.Path:
    """``folder`` as a copy of ``HuggingFaceH4/MATH-500`` (``test.jsonl``: ``problem``,
    ``solution``, ``answer``, ``subject``, ``level``, ``unique_id``), synthetic rows
    (:func:`synthetic_math`)."""
    folder = pathlib.Path(folder)
    data.write_jsonl(synthetic_math(n, seed=5, word_every=word_every), folder / "test.jsonl")
    return folder


def write_smoke_math(benchmark: str, folder: str | pathlib.Path) -> pathlib.Path:
    """The smoke profile's copy of ``benchmark`` ("math": :func:`write_hendrycks_math` with
    :data:`SMOKE_MATH_TRAIN` training rows; "math500": :func:`write_math500`, :data:`SMOKE_MATH500`
    rows) in ``folder``, every second row a word problem the smoke warm start partly solves."""
    if benchmark == "math":
        return write_hendrycks_math(folder, n_train=SMOKE_MATH_TRAIN, word_every=2)
    return write_math500(folder, SMOKE_MATH500, word_every=2)


def write_hendrycks_math(
    folder: str | pathlib.Path, n: int = 28, *, n_train: int = 0, word_every: int = 0
) -> pathlib.Path:
    """``folder`` as a copy of ``EleutherAI/hendrycks_math``:
    ``<subject>/test-00000-of-00001.parquet`` per subject (and ``train-...`` with ``n_train``
    rows), with ``problem``, ``level`` ("Level 3"), ``type`` and ``solution`` (the answer only as
    its last ``\\boxed{}``), synthetic rows (:func:`synthetic_math`)."""
    folder = pathlib.Path(folder)
    for split, rows in (
        ("test", synthetic_math(n, seed=6, word_every=word_every)),
        ("train", synthetic_math(n_train, seed=7, word_every=word_every)),
    ):
        _write_math_split(folder, split, rows)
    return folder


def _write_math_split(folder: pathlib.Path, split: str, rows: list[dict[str, Any]]) -> None:
    for subject in sorted({r["subject"] for r in rows}):
        part = [
            {
                "problem": r["problem"],
                "level": f"Level {r['level']}",
                "type": subject,
                "solution": r["solution"],
            }
            for r in rows
            if r["subject"] == subject
        ]
        name = subject.lower().replace(" & ", "_and_").replace(" ", "_")
        _parquet(part, folder / name / f"{split}-00000-of-00001.parquet")


def write_trace_rows(path: str | pathlib.Path, n: int = 32, *, seed: int = 0) -> pathlib.Path:
    """SFT traces as a ``.jsonl`` of ``prompt``/``response`` rows, the response in the reasoning
    format (as a distilled-trace data set holds them)."""
    records, _ = data.to_records(synthetic_gsm8k(n, seed=seed), "traces", verbose=False)
    rows = [
        {
            "prompt": r["question"],
            "response": f"<reasoning>{r['solution']}</reasoning><answer>{r['answer']}</answer>",
        }
        for r in records
    ]
    return data.write_jsonl(rows, pathlib.Path(path))


def write_preference_rows(path: str | pathlib.Path, n: int = 32, *, seed: int = 0) -> pathlib.Path:
    """Preference pairs as a ``.parquet`` of ``prompt``/``chosen``/``rejected`` strings (the schema
    of the common DPO data sets): chosen has the right answer, rejected a wrong one."""
    records, _ = data.to_records(synthetic_gsm8k(n, seed=seed), "pairs", verbose=False)
    rows = [
        {
            "prompt": r["question"],
            "chosen": f"<reasoning>{r['solution']}</reasoning><answer>{r['answer']}</answer>",
            "rejected": f"<reasoning>{r['solution']}</reasoning>"
            f"<answer>{int(r['answer']) + 1}</answer>",
        }
        for r in records
    ]
    return _parquet(rows, pathlib.Path(path))


def write_chat_traces(
    path: str | pathlib.Path,
    n: int = 32,
    *,
    seed: int = 0,
    preface_words: int = 0,
    long_words: int = 0,
) -> pathlib.Path:
    """SFT traces as a ``.jsonl`` of chat ``messages`` (a user turn, then the assistant's answer in
    the reasoning format), with no ``domain`` column: the shape of the common chat data sets. Each
    prompt starts with a document of ``preface_words`` words (for prompts longer than a limit);
    even rows then ask a GSM8K-style question, odd rows for a summary of the document, whose
    document has ``long_words`` words instead when given (prompts longer than every limit)."""
    records, _ = data.to_records(synthetic_gsm8k(n, seed=seed), "chat", verbose=False)
    words = "the shop sells apples and pens to every child who asks".split()
    rows = []
    for i, r in enumerate(records):
        size = long_words if long_words and i % 2 else preface_words
        preface = f"Note {i}: " + " ".join(words[(i + k) % len(words)] for k in range(size))
        answer = f"<reasoning>{r['solution']}</reasoning><answer>{r['answer']}</answer>"
        question = r["question"]
        if i % 2:
            question = "Summarize the text above in one sentence."
            answer = (
                "<reasoning>It is about a shop.</reasoning><answer>A shop sells things.</answer>"
            )
        turns = [
            {"role": "user", "content": (preface + "\n\n" if preface else "") + question},
            {"role": "assistant", "content": answer},
        ]
        rows.append({"messages": turns})
    return data.write_jsonl(rows, pathlib.Path(path))


def write_mix_sources(folder: str | pathlib.Path, n: int = 8) -> dict[str, str]:
    """Local copies of the default mix's data sets (:data:`tunixkit.mix.SOURCES`, the commercial
    ones) in their real schemas, ``n`` rows of each judged kind, as ``MIX_PATHS`` takes them:
    ``databricks-dolly-15k.jsonl`` (``instruction``, ``context``, ``response``, ``category``; also
    an ``open_qa`` row the mix skips), QASC's train parquet (``question``, ``choices`` {``text``,
    ``label``}, ``answerKey``, ``fact1``, ``fact2``, ``combinedfact``) and MBPP's ``full`` parquet
    (``task_id``, ``text``, ``code``, ``test_list``, ...). Every row differs from the others."""
    folder = pathlib.Path(folder)
    things = ["kite", "river", "lamp", "garden", "train", "violin", "harbor", "meadow", "comet"]
    dolly = []
    for i in range(n):
        thing = things[i % len(things)]
        dolly += [
            {
                "instruction": f"Write a short poem about a {thing} at dawn, number {i}.",
                "context": "",
                "response": f"The {thing} wakes slowly,\nlight on its edges,\nmorning {i}.",
                "category": "creative_writing",
            },
            {
                "instruction": f"Give three ideas for using an old {thing} ({i}).",
                "context": "",
                "response": f"1. Paint the {thing}. 2. Lend the {thing}. 3. Photograph it.",
                "category": "brainstorming",
            },
            {
                "instruction": f"Summarize the passage about the {thing} ({i}).",
                "context": f"The {thing} was built long ago. People visit the {thing} every "
                f"spring, and the town cares for it. Report {i}.",
                "response": f"An old {thing} that the town cares for draws spring visitors.",
                "category": "summarization",
            },
        ]
    dolly.append(
        {
            "instruction": "Who wrote Hamlet?",
            "context": "",
            "response": "Shakespeare.",
            "category": "open_qa",
        }
    )
    qasc = [
        {
            "id": f"q{i}",
            "question": f"What does a {things[i % len(things)]} need to work in case {i}?",
            "choices": {"text": ["salt", f"energy {i}"], "label": ["A", "B"]},
            "answerKey": "B",
            "fact1": f"a {things[i % len(things)]} uses energy {i} to work",
            "fact2": "Energy makes things move.",
            "combinedfact": f"a {things[i % len(things)]} needs energy {i} to work",
            "formatted_question": f"What does it need? (A) salt (B) energy {i}",
        }
        for i in range(n)
    ]
    mbpp = [
        {
            "task_id": i + 1,
            "text": f"Write a function to add {i} to a number.",
            "code": f"def add_{i}(x):\n    return x + {i}",
            "test_list": [f"assert add_{i}(1) == {1 + i}"],
            "test_setup_code": "",
            "challenge_test_list": [],
        }
        for i in range(n)
    ]
    return {
        "databricks/databricks-dolly-15k": str(
            data.write_jsonl(dolly, folder / "databricks-dolly-15k.jsonl")
        ),
        "allenai/qasc": str(_parquet(qasc, folder / "qasc" / "train-00000-of-00001.parquet")),
        "google-research-datasets/mbpp": str(
            _parquet(mbpp, folder / "mbpp" / "full" / "train-00000-of-00001.parquet")
        ),
    }
