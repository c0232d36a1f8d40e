"""What every notebook's presets share: the preset base class, field overrides, the setup cell.

The profile is the one dial: ``Recipe.for_runtime(rt)`` picks the preset, and a notebook's
parameters override single fields through :func:`start` (every notebook's setup cell) instead of
branching on ``if smoke:``. A recipe shows as a table in a notebook. Also here: where each profile's
GSM8K data comes from (:func:`gsm8k`), so notebooks never branch on it either.
"""

from __future__ import annotations

import dataclasses
import pathlib
import shutil
from collections.abc import Mapping
from typing import Any, ClassVar, NamedTuple

from tunixkit import checkpoints, data, evaluation, hosts, runtime, session
from tunixkit.runtime import Runtime, resolve

# qwix regex: adapters on the MLP only (the smoke GRPO recipes; the families' default adds
# attention)
_MLP_LORA = ".*gate_proj|.*up_proj|.*down_proj"

__all__ = [
    "COMPETITION_MODELS",
    "Start",
    "competition_note",
    "gsm8k",
    "math_benchmark",
    "start",
]

# The models the Kaggle Tunix competition accepts as the judged checkpoint.
COMPETITION_MODELS = ("gemma-3-1b-it", "gemma-2-2b-it")


def competition_note(model_id: str, role: str = "model") -> str | None:
    """A warning when ``model_id`` cannot be the judged checkpoint of the competition (None when it
    can, or for the smoke models).

    >>> competition_note("gemma-3-1b-it") is None
    True
    >>> print(competition_note("gemma-3-270m-it", "student"))  # doctest: +NORMALIZE_WHITESPACE
    WARNING: the student gemma-3-270m-it is not a model the competition judges (only gemma-3-1b-it,
    gemma-2-2b-it): use this notebook to learn distillation, or make the student one of those.
    """
    if model_id in COMPETITION_MODELS or model_id.startswith("tiny-"):
        return None
    return (
        f"WARNING: the {role} {model_id} is not a model the competition judges (only "
        f"{', '.join(COMPETITION_MODELS)}): use this notebook to learn distillation, or make the "
        f"{role} one of those."
    )


class _Presets:
    """Shared by every recipe: preset choice, a readable table, nested overrides, and the bars of
    its notebook's last cell (``BARS``: measured on the smoke preset, enforced in its whole smoke
    run, warned about elsewhere; each learning bar fails when training is switched off)."""

    BARS: ClassVar[tuple[evaluation.Bar, ...]] = ()
    # the notebook's parameters (by their name in its parameters cell) beside the session's
    # (SESSION_PARAMETERS): the recipe field(s) each sets, dotted for nested ones, or
    # "inputs.<key>", an input recorded in recipe.json (start_notebook)
    PARAMETERS: ClassVar[dict[str, str | tuple[str, ...]]] = {}

    def learning_rates(self) -> dict[str, float]:
        """Every learning rate of the recipe by its override name (``"grpo.learning_rate"``): what
        the no-learning control sets to 0 (``RECIPE_OVERRIDES``).

        >>> from tunixkit.recipes import Agentic
        >>> Agentic.smoke().learning_rates()
        {'sft_learning_rate': 0.003, 'grpo.learning_rate': 0.001}
        """
        return {
            k: v for k, v in _flatten(self.as_dict()) if k.split(".")[-1].endswith("learning_rate")
        }

    @classmethod
    def full(cls):
        """The full profile (Kaggle's v5e-8): the fields' defaults. ``smoke()`` and
        ``one_chip()`` change some of them (flax ``configs/`` style: a variant modifies the
        default)."""
        return cls()

    @classmethod
    def for_runtime(cls, rt: Runtime):
        """smoke on the smoke profile; ``one_chip()`` where the full profile has a single device
        (Colab's v5e-1) and the recipe has one; else ``full()`` (Kaggle's v5e-8)."""
        if rt.smoke:
            return cls.smoke()
        if rt.device_count == 1 and hasattr(cls, "one_chip"):
            return cls.one_chip()
        return cls.full()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the fields when settings contradict each other; called by
        :func:`start` once every parameter and override is applied (none here)."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    def _repr_markdown_(self) -> str:
        rows = [f"| `{k}` | {v!r} |" for k, v in _flatten(self.as_dict())]
        return f"**{type(self).__name__} recipe**\n\n| setting | value |\n|---|---|\n" + "\n".join(
            rows
        )


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        out += (
            _flatten(v, f"{prefix}{k}.")
            if isinstance(v, dict) and k != "models"
            else [(prefix + k, v)]
        )
    return out


def _override(recipe: Any, name: str, value: Any) -> Any:
    """``recipe`` with field ``name`` set: a top-level field, a dotted one (``grpo.batch_size``), or
    a field of exactly one nested settings object (``num_generations`` ->
    ``grpo.num_generations``)."""
    fields = {f.name for f in dataclasses.fields(recipe)}
    if name in fields:
        return dataclasses.replace(recipe, **{name: _typed(recipe, name, value)})
    outer, _, inner = name.partition(".")
    if (
        inner and outer in fields and dataclasses.is_dataclass(getattr(recipe, outer))
    ):  # "grpo.batch_size"
        return dataclasses.replace(
            recipe, **{outer: _override(getattr(recipe, outer), inner, value)}
        )
    nested = [
        f
        for f in fields
        if dataclasses.is_dataclass(getattr(recipe, f))
        and name in {g.name for g in dataclasses.fields(getattr(recipe, f))}
    ]
    if len(nested) != 1:
        known = sorted(
            fields
            | {
                f"{f}.{g.name}"
                for f in fields
                if dataclasses.is_dataclass(getattr(recipe, f))
                for g in dataclasses.fields(getattr(recipe, f))
            }
        )
        raise TypeError(
            f"{type(recipe).__name__} has no field {name!r}; its fields: {', '.join(known)}"
        )
    settings = getattr(recipe, nested[0])
    inner = dataclasses.replace(settings, **{name: _typed(settings, name, value)})
    return dataclasses.replace(recipe, **{nested[0]: inner})


def _typed(recipe: Any, name: str, value: Any) -> Any:
    """``value`` for the number field ``name`` of ``recipe``: a number as it is, a numeric string
    as that number (papermill's YAML reads ``3e-05`` as a string), anything else an error.

    >>> from tunixkit.recipes import SFT
    >>> _typed(SFT.smoke(), "learning_rate", "3e-05"), _typed(SFT.smoke(), "steps", 7)
    (3e-05, 7)
    >>> _typed(SFT.smoke(), "steps", "many")
    Traceback (most recent call last):
    ...
    TypeError: SFT.steps takes a number (now 150), not 'many'
    """
    current = getattr(recipe, name)
    if isinstance(current, tuple) and isinstance(value, list):  # a parameter cell writes lists
        return tuple(value)
    number = isinstance(current, (int, float)) and not isinstance(current, bool)
    if not number or not isinstance(value, str):
        return value
    try:
        return type(current)(float(value)) if isinstance(current, float) else int(value)
    except ValueError:
        raise TypeError(
            f"{type(recipe).__name__}.{name} takes a number (now {current!r}), not {value!r}"
        ) from None


class Start(NamedTuple):
    """What a notebook's setup cell unpacks (:func:`start_notebook`): ``rt, recipe, out_dir,
    clock``."""

    rt: Runtime
    recipe: Any
    out_dir: pathlib.Path
    clock: session.Session  # the session clock (SESSION_HOURS from the first cell)


# every notebook's session parameters, by their name in its parameters cell: start's arguments
SESSION_PARAMETERS = {
    "PROFILE": "profile",
    "OUTPUT_DIR": "output_dir",
    "SESSION_HOURS": "session_hours",
    "RESUME_FROM": "resume_from",
    "START_FRESH": "start_fresh",
    "COMPILE_CACHE": "compile_cache",
    "REHEARSAL": "rehearsal",
    "REHEARSAL_FROM": "rehearsal_from",
    "RECIPE_OVERRIDES": "recipe_overrides",
}


def start_notebook(
    preset: type[_Presets], parameters: Mapping[str, Any], *, verbose: bool = True
) -> Start:
    """Every notebook's setup cell, ``recipes.start_notebook(recipes.X, globals())``: :func:`start`
    with the values of the notebook's parameters cell (``parameters``: its variables), the
    session's own (:data:`SESSION_PARAMETERS`) and each of ``preset.PARAMETERS``, which says the
    recipe field(s) a parameter sets or the input it is recorded as. A parameter the notebook does
    not define keeps the recipe's value; ``OUTPUT_DIR`` is required.

    >>> import tempfile
    >>> from tunixkit.recipes import Quickstart
    >>> Quickstart.PARAMETERS
    {'MODEL_PATH': 'inputs.model_path', 'MODEL_ID': 'model_id'}
    >>> cell = {"PROFILE": "smoke", "OUTPUT_DIR": tempfile.mkdtemp(), "MODEL_ID": None}
    >>> start_notebook(Quickstart, cell, verbose=False).recipe.model_id
    'tiny-gemma3-sft'
    """
    if "OUTPUT_DIR" not in parameters:
        raise KeyError("OUTPUT_DIR: the notebook's parameters cell must set it")
    given = {a: parameters[k] for k, a in SESSION_PARAMETERS.items() if k in parameters}
    inputs: dict[str, Any] = {}
    for name, fields in preset.PARAMETERS.items():
        if name not in parameters:
            continue
        value = parameters[name]
        for field in (fields,) if isinstance(fields, str) else fields:
            if field.startswith("inputs."):  # recorded as JSON writes it
                inputs[field.removeprefix("inputs.")] = (
                    list(value) if isinstance(value, tuple) else value
                )
            else:
                given[field] = value
    return start(
        preset,
        given.pop("profile", None),
        given.pop("output_dir"),
        inputs=inputs,
        verbose=verbose,
        **given,
    )


def start(
    preset: type[_Presets],
    profile: str | None,
    output_dir: str | pathlib.Path,
    *,
    session_hours: float | None = None,
    resume_from: str | None = None,
    start_fresh: bool = False,
    inputs: dict[str, Any] | None = None,
    rehearsal: bool = False,
    rehearsal_from: str | pathlib.Path | None = None,
    verbose: bool = True,
    recipe_overrides: dict[str, Any] | None = None,
    compile_cache: str | pathlib.Path | bool | None = None,
    **overrides: Any,
) -> Start:
    """Every notebook's setup cell: resolve the profile, pick ``preset``'s smoke or full recipe,
    apply the notebook parameters that are not None (``overrides``, by field name) and then
    ``recipe_overrides`` (``RECIPE_OVERRIDES``: any field, dotted for nested ones; a field also set
    by its own parameter is an error), prepare
    ``output_dir`` (``recipe.json``; continue a run or ``resume_from`` a previous session's output,
    see :func:`tunixkit.session.prepare`) and start the session clock. ``inputs``: the other
    parameters that decide what is trained (data, start model), recorded in ``recipe.json`` too.

    ``rehearsal`` (``REHEARSAL = True``): the run goes to ``output_dir/rehearsal`` (made anew), its
    stages stop after a few steps and its evaluations take a few items (:class:`session.Rehearsal`),
    and the notebook's ``clock.rehearsal_report()`` projects the real run into
    ``output_dir/rehearsal.json``. ``output_dir`` itself, and any run in it, are left as they are.
    ``rehearsal_from`` (``REHEARSAL_FROM``): such a rehearsal's output folder or its
    ``rehearsal.json`` (e.g. a Kaggle input: a Save & Run All version starts with an empty
    ``OUTPUT_DIR``), whose steps that fit size the real run's learning-rate schedules
    (:meth:`tunixkit.session.Session.schedule_steps`). ``compile_cache`` (``COMPILE_CACHE``): where
    compiled programs are kept for the next session and for the run after a rehearsal
    (:func:`tunixkit.runtime.compilation_cache`); None: ``output_dir/jax_cache``; False: nowhere.

    On a multi-host slice (one process per host, each running the notebook) it first joins the
    processes (:func:`tunixkit.hosts.start`), before any other JAX call.

    >>> import tempfile
    >>> from tunixkit.recipes import Quickstart
    >>> out = tempfile.mkdtemp()  # a run of other code in the same folder would be refused
    >>> started = start(Quickstart, "smoke", out, verbose=False,
    ...                 num_questions=None)
    >>> started.recipe.num_questions
    4
    >>> start(Quickstart, "smoke", out, verbose=False,
    ...       num_question=2)  # doctest: +ELLIPSIS, +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    TypeError: Quickstart has no field 'num_question'; its fields: eval, eval.batch_size, ...,
    model_id, num_questions
    >>> start(Quickstart, "smoke", out, verbose=False, num_questions=2,
    ...       recipe_overrides={"num_questions": 3})  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: num_questions is set twice, to 2 by its parameter and to 3 in RECIPE_OVERRIDES:
    set it in one place
    >>> start(Quickstart, "smoke", tempfile.mkdtemp(), verbose=False, num_questions=None,
    ...       recipe_overrides={"num_questions": 3}).recipe.num_questions
    3
    """
    hosts.start()  # several processes: joined before the first JAX call (resolve counts devices)
    rt = resolve(profile, verbose=verbose)
    recipe = preset.for_runtime(rt)
    for name, value in overrides.items():
        updated = _override(recipe, name, value)  # an unknown name is an error, even when unset
        recipe = updated if value is not None else recipe
    for name, value in (recipe_overrides or {}).items():
        if overrides.get(name) is not None:
            raise ValueError(
                f"{name} is set twice, to {overrides[name]!r} by its parameter and to {value!r} "
                "in RECIPE_OVERRIDES: set it in one place"
            )
        recipe = _override(recipe, name, value)
    recipe.validate()
    out_dir = pathlib.Path(output_dir).resolve()
    report_dir = out_dir
    if rehearsal:
        out_dir = out_dir / session.REHEARSAL_DIR
        shutil.rmtree(out_dir, ignore_errors=True)  # each rehearsal starts from nothing
        resume_from, start_fresh = None, False
    record = {
        session.VERSION_KEY: runtime.code_id(),
        "notebook": preset.__name__,
        "profile": rt.profile,
        "recipe": recipe.as_dict(),
        "inputs": dict(inputs or {}),
    }
    said = (
        hosts.once(  # of several processes, process 0 prepares the shared folder
            f"prepare {out_dir}",
            session.prepare,
            out_dir,
            record,
            resume_from=resume_from,
            start_fresh=start_fresh,
        )
        or f"prepared by process 0 of {hosts.count()}"
    )
    clock = session.Session.start(out_dir, session_hours)
    # under the notebook's OUTPUT_DIR, not its rehearsal's: the real run reuses what that compiled
    if compile_cache is None or compile_cache is True:
        compile_cache = report_dir / runtime.COMPILE_CACHE
    cache = runtime.compilation_cache(compile_cache or None)
    if rehearsal_from is not None:
        plan = pathlib.Path(rehearsal_from)
        plan = plan / session.REHEARSAL_FILE if plan.is_dir() else plan
        if not plan.is_file():
            raise FileNotFoundError(
                f"REHEARSAL_FROM={rehearsal_from}: no {session.REHEARSAL_FILE} there; expected a "
                "rehearsal's OUTPUT_DIR (REHEARSAL = True writes it) or the file itself"
            )
        clock.plan = plan
    if resume_from is not None and not rehearsal:
        hosts.once(
            "carry the judged model",
            checkpoints.carry_judged,
            resume_from,
            out_dir,
            clock.judged_dir(),
        )
    if rehearsal:  # its judged model stays in its own folder, removed with it
        batch = getattr(getattr(recipe, "eval", None), "batch_size", 8)
        clock.rehearsal = session.Rehearsal(report_dir=report_dir, items=2 * batch)
        clock.judged_root = None
    if verbose:
        print(f"output: {out_dir} ({said})\n{clock.describe()}")
        print(f"compiled programs kept in {cache}" if cache else "no compilation cache")
    return Start(rt, recipe, out_dir, clock)


def grpo_records(
    rt: Runtime,
    dataset: str,
    *,
    data_dir: str | pathlib.Path,
    source: str = "hf",
    gsm8k_path: str | pathlib.Path | None = None,
    math_path: str | pathlib.Path | None = None,
    math500_path: str | pathlib.Path | None = None,
    limit: int | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, test) records of GRPO's ``dataset`` (``recipes.GRPO.dataset``): GSM8K's train and
    test splits (:func:`gsm8k`), or for ``"math"`` MATH's train split (7,500 problems) with
    MATH-500 to evaluate on (:func:`math_benchmark`); ``limit`` test problems at most."""
    if dataset == "math":
        train = math_benchmark(rt, "math", data_dir=data_dir, path=math_path, split="train")
        test = math_benchmark(rt, "math500", data_dir=data_dir, path=math500_path, limit=limit)
        return train, test
    load: dict[str, Any] = dict(data_dir=data_dir, source=source, path=gsm8k_path)
    return gsm8k(rt, "train", **load), gsm8k(rt, "test", limit=limit, **load)


def gsm8k(
    rt: Runtime,
    split: str,
    *,
    data_dir: str | pathlib.Path,
    source: str = "hf",
    path: str | pathlib.Path | None = None,
    limit: int | None = None,
    max_operand: int | None = None,
) -> list[data.Record]:
    """GSM8K ``split`` for the profile: the real dataset (full: downloaded from ``source``, or read
    from ``path``, a local copy, see :func:`tunixkit.data.load_gsm8k`) or synthetic files written to
    ``data_dir`` (smoke, numbers up to ``max_operand``, by default the smoke profile's); both go
    through the same loader."""
    if rt.smoke:
        kit = runtime.smoke_kit()
        paths = kit.write_synthetic_gsm8k(data_dir, max_operand=max_operand)
        return data.load_gsm8k(split, source="file", path=str(paths[split]), limit=limit)
    if path is not None:
        return data.load_gsm8k(split, source="file", path=path, limit=limit)
    try:
        return data.load_gsm8k(split, source=source, limit=limit)
    except runtime.DownloadError as exc:  # say it in the notebook's words
        raise runtime.DownloadError(
            f"{exc} In the notebook: attach a copy of GSM8K (the openai/gsm8k folder, or its "
            "split's .parquet/.jsonl file) and set GSM8K_PATH to it."
        ) from exc


def math_benchmark(
    rt: Runtime,
    benchmark: str,
    *,
    data_dir: str | pathlib.Path,
    path: str | pathlib.Path | None = None,
    limit: int | None = None,
    split: str = "test",
) -> list[dict[str, Any]]:
    """The ``split`` problems of a MATH-style ``benchmark`` (``"math500"`` or ``"math"``,
    :data:`tunixkit.data.MATH_BENCHMARKS`) for the profile: the real data set (full: from the
    Hugging Face hub, or ``path``, a local copy) or synthetic problems written to ``data_dir`` in
    the same layout (smoke); both go through :func:`tunixkit.data.load_math`."""
    if rt.smoke:
        kit = runtime.smoke_kit()
        folder = pathlib.Path(data_dir) / benchmark
        kit.write_smoke_math(benchmark, folder)
        return data.load_math(benchmark, path=folder, limit=limit, split=split)
    parameter = {"math500": "MATH500_PATH", "math": "MATH_PATH"}.get(benchmark, "its path")
    try:
        return data.load_math(benchmark, path=path, limit=limit, split=split)
    except runtime.DownloadError as exc:  # say it in the notebook's words
        raise runtime.DownloadError(
            f"{exc} In the notebook: attach a copy of it and set {parameter} to its folder or file."
        ) from exc
