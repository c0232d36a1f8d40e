"""Compare tunixkit's answer checking with math-verify and lm-eval's GSM8K filters on a fixed corpus.

Reads ``tests/data/answer_corpus.jsonl`` (completions with a gold answer and a human verdict) and
writes ``docs/answer_checking.md``: tunixkit's answer policy (from ``tunixkit.answers``' docstring,
with live readings of examples), agreement with the human verdict per checker, every case where a
checker disagrees with it, and a justification (:data:`WHY`) for every case where tunixkit disagrees
with the human verdict, math-verify or lm-eval's flexible-extract. A missing or unneeded
justification is an error, so the document cannot go stale silently.

Regenerate (needs the test extras, ``bash setup_notebook_tpu_single_host.sh --test`` installs them):

    .venv/bin/python scripts/compare_checkers.py
"""

from __future__ import annotations

import json
import pathlib
import re
import sys
import textwrap

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "answer_corpus.jsonl"
LATEX_CORPUS = ROOT / "tests" / "data" / "latex_corpus.jsonl"
OUT = ROOT / "docs" / "answer_checking.md"


def lm_eval_extractors():
    """lm-eval 0.4.13's GSM8K filters from its installed task YAML: name -> (extract, check)."""
    import lm_eval
    from lm_eval.api.metrics import exact_match_hf_evaluate
    from lm_eval.filters.extraction import RegexFilter

    task = pathlib.Path(lm_eval.__file__).parent / "tasks" / "gsm8k" / "gsm8k.yaml"
    spec = yaml.safe_load(task.read_text())
    metric = next(m for m in spec["metric_list"] if m["metric"] == "exact_match")
    options = {k: metric[k] for k in ("regexes_to_ignore", "ignore_case", "ignore_punctuation")}
    out = {}
    for flt in spec["filter_list"]:
        regex = flt["filter"][0]
        rf = RegexFilter(
            regex_pattern=regex["regex_pattern"], group_select=regex.get("group_select", 0)
        )

        def extract(completion: str, rf=rf) -> str:
            return list(rf.apply([[completion]], [{}]))[0][0]

        def check(completion: str, gold: str, extract=extract) -> bool:
            pred = extract(completion)
            return bool(exact_match_hf_evaluate([pred], [f"#### {gold}"], **options)["exact_match"])

        out[f"lm-eval {flt['name']}"] = (extract, check)
    return out


def lm_eval_checkers():
    """lm-eval 0.4.13's GSM8K strict-match and flexible-extract, as ``check(completion, gold)``."""
    return {name: check for name, (_, check) in lm_eval_extractors().items()}


def math_verify_checker():
    from math_verify import parse, verify

    def check(completion: str, gold: str) -> bool:
        return bool(verify(parse(gold), parse(completion)))

    return check


def math_verify_reading(completion: str) -> str:
    """What math-verify's ``parse`` extracts from a completion (its string form), or ``none``."""
    from math_verify import parse

    found = parse(completion)
    return str(found[-1]) if found else "none"


def tunixkit_reading(completion: str, *, strict: bool = False) -> str:
    """What tunixkit reads: a number, ``hedge a, b`` or ``none``."""
    from tunixkit.answers import extract_answer, format_number

    found = extract_answer(completion, strict=strict)
    if found.hedge:
        return "hedge " + ", ".join(format_number(v) for v in found.hedge)
    return "none" if found.value is None else format_number(found.value)


def wrap(text: str, first: str = "", rest: str = "") -> list[str]:
    """``text`` as Markdown lines of at most 100 characters."""
    return textwrap.wrap(
        text,
        100,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def bullets(*items: str) -> list[str]:
    """Markdown bullets, wrapped."""
    return [line for item in items for line in wrap(item, "- ", "  ")]


def _cell(text: str, limit: int = 90) -> str:
    text = re.sub(r"\s+", " ", text).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _verdict(ok: bool, reading: str, human: bool) -> str:
    """A checker's verdict (Y/n) and what it read, bold where it disagrees with the human's."""
    mark = "Y" if ok else "n"
    return f"**{mark}** {reading}" if ok != human else f"{mark} {reading}"


def _code(text: str, limit: int = 90) -> str:
    return "`" + _cell(text, limit).replace("`", "'") + "`"


def policy() -> list[str]:
    """The policy section: the rule from ``tunixkit.answers``' docstring, and live readings."""
    from tunixkit import answers

    doc = answers.__doc__
    rules = doc[doc.index("1. **Where") : doc.index("\n>>>")].strip()
    rules = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", rules).replace("``", "`")
    lines = [
        "## Policy",
        "",
        *wrap(
            "tunixkit reads an answer in one way everywhere: `answers.extract_answer` (the"
            " evaluator's accuracy and partial accuracy, `is_correct`), the GRPO rewards that read"
            " the gold answer (`answer_match`, `number_match`, `strict_answer`), the agentic scorer"
            " and the domain grader. This is `tunixkit/answers.py`'s own statement of it:"
        ),
        "",
        rules,
        "",
        *wrap(
            "**Hedge or narration.** Only a conclusion marker (point 2) makes a statement with"
            " several numbers one conclusion; every other word between two different numbers"
            " leaves it a hedge or a list: *or*, *either ... or*, *between ... and*, *from ... to*,"
            " *to*, `-`, `–`, `,`, *and*, *vs*, *maybe*, *probably*, *about*, *not*, parentheses."
            " `from 10 to 16, so 16` is 16, while `from 10 to 16` and `12 or 13, probably 12` are"
            " hedges. A fraction (`7/8`) is one number."
        ),
        "",
        *wrap(
            "**Rewards.** `answer_match` (and `strict_answer`, which adds the format) gives a hedge"
            " -1, what a wrong number far from the gold gets, never partial credit; `number_match`"
            " gives it 0. `tests/test_rewards_answers.py::test_listing_several_numbers_never_pays`"
            " checks, for every registered reward that reads the gold answer, that a list of"
            " different numbers holding the gold (any order, any connective but a conclusion"
            ' marker, in a tag, several tags, a box, after "the answer is", after `####` or in'
            " the last sentence) never earns more than the same completion with one wrong number,"
            " and is never correct."
        ),
        "",
        *wrap(
            "Readings, live (`<answer>` holding the text; *hedge* = a wrong answer, *none* = no"
            " answer):"
        ),
        "",
        "| written | read | written | read | written | read |",
        "|---|---|---|---|---|---|",
    ]
    cells = [f"{_code(x)} | {tunixkit_reading(f'<answer>{x}</answer>')}" for x in EXAMPLES]
    cells += [" | "] * (-len(cells) % 3)
    lines += ["| " + " | ".join(cells[i : i + 3]) + " |" for i in range(0, len(cells), 3)]
    return lines


def render() -> str:
    """The Markdown report (needs math-verify and lm-eval installed)."""
    from tunixkit import evaluation
    from tunixkit.answers import is_correct
    from tunixkit.rewards import has_format

    rows = _rows(CORPUS)
    extractors = lm_eval_extractors()
    checkers = {
        "tunixkit": lambda c, g: is_correct(c, g),
        "tunixkit strict": lambda c, g: evaluation.categorize(c, g, truncated=False) == "correct",
        "math-verify": math_verify_checker(),
        **{name: check for name, (_, check) in extractors.items()},
    }
    verdicts = {
        name: [bool(fn(r["completion"], r["gold"])) for r in rows] for name, fn in checkers.items()
    }
    human = [bool(r["correct"]) for r in rows]
    n = len(rows)
    tk, flexible = verdicts["tunixkit"], "lm-eval flexible-extract"
    # tunixkit strict only adds the format: every disagreement it does not share with tunixkit
    # is an untagged, unclosed or out-of-shape answer that the human accepts
    for i, r in enumerate(rows):
        if verdicts["tunixkit strict"][i] != human[i] and tk[i] == human[i]:
            assert human[i] and not has_format(r["completion"]), r["id"]
    needed = {
        r["id"]
        for i, r in enumerate(rows)
        if tk[i] != human[i]
        or tk[i] != verdicts["math-verify"][i]
        or tk[i] != verdicts[flexible][i]
    }
    if needed != set(WHY):
        raise ValueError(
            f"WHY needs a justification for ids {sorted(needed - set(WHY))} "
            f"and has unneeded ones for {sorted(set(WHY) - needed)}"
        )
    lines = [
        "# Answer checking: tunixkit vs math-verify vs lm-eval (GSM8K, MATH)",
        "",
        *wrap(
            f"Generated by `scripts/compare_checkers.py` from `tests/data/answer_corpus.jsonl` ({n}"
            " completions, each with a gold answer and a human verdict: does the response commit"
            " to the gold answer?). Do not edit by hand; rerun the script."
        ),
        "",
        *bullets(
            '**tunixkit**: `answers.is_correct` (tags, `\\boxed{}`, "the answer is", `####`, last'
            " sentence; the policy below; numeric tolerance). The evaluator's *partial accuracy*.",
            "**tunixkit strict**: the evaluator's *accuracy*: the exact `<reasoning>`/`<answer>`"
            " format and the right number in `<answer>` (what the GRPO format rewards train for).",
            "**math-verify** 0.9.0: `verify(parse(gold), parse(completion))`.",
            "**lm-eval** 0.4.13 GSM8K `strict-match` (`#### N`) and `flexible-extract` (last"
            " number-like string), with the task's own `exact_match` options, read from its"
            " installed YAML.",
        ),
        "",
        *policy(),
        "",
        "## Agreement with the human verdict",
        "",
        "| checker | agrees | accepts | false accepts | false rejects |",
        "|---|---|---|---|---|",
    ]
    lines += agreement_rows(verdicts, human, accepts=True)
    lines.append("")
    for name in ("math-verify", flexible):
        same = sum(a == b for a, b in zip(tk, verdicts[name], strict=True))
        lines.append(f"- tunixkit and {name} give the same verdict on {same}/{n} ({same / n:.0%}).")
    lines += [
        "",
        "## Every case where a checker disagrees with the human verdict",
        "",
        "`Y`/`n` = accepted/rejected; **bold** = disagrees with the human verdict.",
        "",
        "| id | case | gold | completion | human | " + " | ".join(verdicts) + " |",
        "|---|---|---|---|---|" + "---|" * len(verdicts),
    ]
    for i, r in enumerate(rows):
        row_v = {name: v[i] for name, v in verdicts.items()}
        if all(x == human[i] for x in row_v.values()):
            continue
        cells = " | ".join(
            ("**Y**" if x else "**n**") if x != human[i] else ("Y" if x else "n")
            for x in row_v.values()
        )
        lines.append(
            f"| {r['id']} | {r['case']} | {r['gold']} | {_code(r['completion'])} | "
            f"{'Y' if human[i] else 'n'} | {cells} |"
        )
    extract_flexible = extractors[flexible][0]
    lines += [
        "",
        "## Why tunixkit decides as it does, case by case",
        "",
        *wrap(
            "Every case where tunixkit disagrees with the human verdict, with math-verify or with"
            " lm-eval flexible-extract, with what each of them read and why tunixkit's reading is"
            " the right one (or that it is a known limitation). Each verdict comes with what the"
            " checker read: tunixkit's value (*hedge*: the different numbers of a hedged answer,"
            " a wrong answer), math-verify's `parse(completion)`, and the string flexible-extract"
            " compares with `#### gold`."
        ),
        "",
        "| id | gold | completion | human | tunixkit | math-verify | flexible | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows):
        if r["id"] not in WHY:
            continue

        c = r["completion"]
        lines.append(
            f"| {r['id']} | {r['gold']} | {_code(c, 60)} | {'Y' if human[i] else 'n'} | "
            f"{_verdict(tk[i], _cell(tunixkit_reading(c)), human[i])} | "
            f"{_verdict(verdicts['math-verify'][i], _code(math_verify_reading(c), 24), human[i])} | "
            f"{_verdict(verdicts[flexible][i], _code(extract_flexible(c), 24), human[i])} | {WHY[r['id']]} |"
        )
    lines += ["", "## Why they disagree", "", *EXPLANATIONS, "", *latex_section()]
    return "\n".join(lines) + "\n"


def agreement_rows(
    verdicts: dict[str, list[bool]], human: list[bool], *, accepts: bool
) -> list[str]:
    """One table row per checker: agreement with the human verdict, (its accepts,) false accepts
    and false rejects."""
    n, out = len(human), []
    for name, v in verdicts.items():
        agree = sum(a == h for a, h in zip(v, human, strict=True))
        fa = sum(a and not h for a, h in zip(v, human, strict=True))
        fr = sum(h and not a for a, h in zip(v, human, strict=True))
        said = f" {sum(v)} |" if accepts else ""
        out.append(f"| {name} | {agree}/{n} ({agree / n:.0%}) |{said} {fa} | {fr} |")
    return out


def _rows(path: pathlib.Path) -> list[dict]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def math_verify_on_the_answer(completion: str, gold: str) -> tuple[bool, str]:
    """math-verify alone on what tunixkit reads as the answer statement (the last ``<answer>``
    block, else the whole completion), with its reading: tunixkit's LaTeX check without its
    hedge rules."""
    from math_verify import parse, verify

    from tunixkit.answers import ANSWER_TAG_RE

    tags = ANSWER_TAG_RE.findall(completion)
    found = parse("\\boxed{" + tags[-1] + "}") if tags else parse(completion)
    ok = bool(verify(parse("\\boxed{" + gold + "}"), found))
    return ok, str(found[-1]) if found else "none"


def latex_section() -> list[str]:
    """MATH-style answers: ``answers.latex_correct`` against math-verify alone, on
    ``tests/data/latex_corpus.jsonl``, every disagreement justified (:data:`WHY_LATEX`)."""
    from tunixkit.answers import latex_answer, latex_correct

    rows = _rows(LATEX_CORPUS)
    n, human = len(rows), [bool(r["correct"]) for r in rows]
    tk = [latex_correct(r["completion"], r["gold"]) for r in rows]
    mv = [math_verify_on_the_answer(r["completion"], r["gold"]) for r in rows]
    whole = math_verify_checker()
    verdicts = {
        "tunixkit `latex_correct`": tk,
        "math-verify on the answer block": [ok for ok, _ in mv],
        "math-verify on the whole completion": [
            bool(whole(r["completion"], r["gold"])) for r in rows
        ],
    }
    needed = {r["id"] for i, r in enumerate(rows) if tk[i] != human[i] or tk[i] != mv[i][0]}
    if needed != set(WHY_LATEX):
        raise ValueError(
            f"WHY_LATEX needs a justification for ids {sorted(needed - set(WHY_LATEX))} "
            f"and has unneeded ones for {sorted(set(WHY_LATEX) - needed)}"
        )
    lines = [
        "## MATH-style answers (LaTeX): tunixkit vs math-verify",
        "",
        *wrap(
            "Notebook 05's MATH-500 and MATH accuracy and the GRPO reward `latex_answer_match` read"
            " the answer with `answers.latex_answer` and decide equivalence with math-verify"
            " (`answers.latex_correct`); the policy is `tunixkit/answers.py`'s docstring. What"
            " tunixkit adds to math-verify is where the answer is and its hedge rules, so it is"
            f" compared here with math-verify alone on `tests/data/latex_corpus.jsonl` ({n}"
            " completions with a LaTeX gold answer and a human verdict), read two ways: on the"
            " answer block (tunixkit's check without its hedge rules) and on the whole completion"
            " (as the GSM8K table above reads it)."
        ),
        "",
        "| checker | agrees with the human verdict | false accepts | false rejects |",
        "|---|---|---|---|",
    ]
    lines += agreement_rows(verdicts, human, accepts=False)
    same = sum(a == b for a, (b, _) in zip(tk, mv, strict=True))
    lines += [
        "",
        *wrap(
            f"tunixkit and math-verify on the answer block give the same verdict on {same}/{n}."
            " Every case where tunixkit disagrees with the human verdict or with math-verify on the"
            " answer block, with what each read (tunixkit: the answer, or the candidates of a"
            " hedge):"
        ),
        "",
        "| id | case | gold | completion | human | tunixkit | math-verify | why |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(rows):
        if r["id"] not in WHY_LATEX:
            continue
        found = latex_answer(r["completion"])
        read = "hedge " + ", ".join(found.hedge) if found.hedge else found.text or "none"

        lines.append(
            f"| {r['id']} | {r['case']} | {_code(r['gold'])} | {_code(r['completion'], 60)} |"
            f" {'Y' if human[i] else 'n'} | {_verdict(tk[i], _code(read, 24), human[i])} |"
            f" {_verdict(mv[i][0], _code(mv[i][1], 24), human[i])} | {WHY_LATEX[r['id']]} |"
        )
    return lines


def main() -> int:
    text = render()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(text.split("## Every case")[0].split("## Agreement with the human verdict")[1].strip())
    print(f"wrote {OUT}")
    return 0


EXAMPLES = [
    *("from 10 to 16, so 16", "5 + 5 = 10", "12 apples", "There were 40, thus 28 remain"),
    *("Total: 4", "x = 18", "7 or 8", "either 7 or 8", "between 7 and 8", "from 7 to 8"),
    *("7-8", "7–8", "7 to 8 hours", "7, 8", "7 and 8", "about 7 or 8", "12 or 13, probably 12"),
    *("7 or 7", "7 (seven)", "$18 (18 dollars)", "7/8", "1.5e3", "1e-3", "1.5 × 10^3"),
    *("1.5*10^3", "$2.5 \\times 10^{6}$", "1,234", "1,23", "12 000", "$1,234.50", "€4.50", "£3"),
    *("-$5", "$-5", "−7", "40%", "3/4", "\\frac{3}{4}", "3 1/2", "2\\frac{1}{4}", "3½", "3-1/2"),
    *("-3 1/2", "007", ".5", "**18**", "\\boxed{18}", "twelve", "3:30", "18, not 20"),
]

# Per corpus id: why tunixkit's verdict is right where it differs from math-verify or lm-eval
# flexible-extract, or why it differs from the human verdict (a known limitation, or a choice).
MV_TAG = "math-verify does not know the `<answer>` tag and took a number of the reasoning"
STRING = "lm-eval compares strings after removing `,` `$` and a final `.`"
HEDGE = "two different numbers and no conclusion marker: a hedge, never correct"
WHY = {
    9: "`0` is a number; math-verify extracted nothing from it",
    13: f"`250,000` is 250000; {MV_TAG} (`/ 4`)",
    14: "`1,23` is no thousands grouping: two numbers, a hedge; flexible-extract strips the comma",
    16: "a single space between groups of three digits is a thousands separator (SI style)",
    18: f"`$18.00` is 18; {STRING}: `18.00` is not `18`",
    20: "`-$5` is -5; math-verify dropped the sign",
    21: f"`€4.50` is 4.5; {STRING}: `4.50` is not `4.5`",
    22: "a unit word after the number does not change it; math-verify extracted nothing",
    30: "`−` (U+2212) is a minus; flexible-extract's `-?` is ASCII only and read 7",
    31: f"`3.50` is 3.5; {STRING}",
    33: f"the tag says 2, the gold is 2.5; {MV_TAG}",
    34: f"`18.0` is 18; math-verify extracted nothing, {STRING}",
    36: "known limitation: 33.333 is not 33.33 within the 1e-6 relative tolerance (GSM8K golds "
    "are exact; a looser one would accept real misses); a person reads it as 100/3 rounded",
    38: f"`.5` is 0.5; {STRING}",
    39: "`1/2` is 0.5; math-verify extracted nothing, flexible-extract took the denominator",
    40: "`3/4` is 0.75; math-verify extracted nothing, flexible-extract took the denominator",
    41: "`1 1/2` is a mixed number, 1.5; the others read 1 or 2",
    42: "`\\frac{1}{4}` is 0.25; flexible-extract took the denominator",
    43: "`12/4` is 3; flexible-extract took the denominator",
    44: "the boxed 7 is the answer; flexible-extract matched `$.`",
    48: "known limitation: a box is the committed answer and is read before plain text, so a "
    "correction written after it is missed; reading the later number would let any trailing "
    "number override a box",
    49: "`\\frac{3}{2}` in a box is 1.5; flexible-extract took the denominator",
    53: 'a choice: "the answer is 12 apples and 3 pears" names two quantities; tunixkit cannot '
    "know which one was asked and reads a list, so a list of candidates never passes",
    54: '"the answer is" is read to the end of its sentence; the check after it is not the '
    "answer; the others took its 10",
    55: "the stated answer is 8, not the check's 10",
    62: "`#### 5` is read to the end of its line; the double-check after it is not the answer",
    65: "known limitation: without a marker the last sentence is read, and it names 36 and 3 with "
    "nothing to say which is the answer; tunixkit gives no answer rather than guess (the others "
    "took 3, which is wrong)",
    66: "known limitation: as 65 (5 hours, 3 pm); no answer rather than the wrong 3",
    71: f"{HEDGE}; the others took the last number",
    72: f"known limitation: {HEDGE} (a reader knows *in total* marks the answer; the policy "
    "has no such word list, and the others took 5)",
    74: "known limitation: number words are not read (no checker reads them)",
    75: "the answer tag is empty: no answer; the others took the reasoning's 4",
    77: "two `<answer>` blocks with different numbers are a hedge; the others took the last",
    79: "`either 4 or 5` is a hedge; math-verify took the 4",
    80: "`either 5 or 4` is a hedge; flexible-extract took the last number",
    82: "33.3333333 equals 33.3333 within the tolerance; math-verify extracted nothing, "
    "flexible-extract compares strings",
    83: "known limitation: a clock time `3:30` is not read as 3.5 (it may be a time of day or a "
    "ratio); it reads as two numbers, a hedge",
    85: "`1e3` is 1000 (scientific notation); math-verify read nothing, flexible-extract 3",
    86: "`2,024` is 2024; math-verify extracted nothing",
    87: "`007` is 7; math-verify extracted nothing, flexible-extract compares strings",
    88: "markdown bold does not change the number; math-verify extracted nothing",
    92: f"the tag says 18; {MV_TAG} (`The answer is 20`)",
    97: "the closed tag is the answer, not the rambling after it",
    98: "`<end_of_turn>` is no number; math-verify extracted nothing",
    113: "*so* settles it: 16; math-verify took the 10",
    114: "the conclusion is 16, not the range's start",
    117: "*thus* settles it: 28; math-verify took the 40",
    118: "the conclusion is 28, not the premise 40",
    119: "*so* settles it: 45; math-verify took the 20",
    122: "`7 or 8` is a hedge, wrong for 8 as for 7; the others took the 8",
    123: "`between 7 and 8` is a hedge; math-verify took the 7",
    125: "`about 7 or 8` is a hedge; flexible-extract took the last number",
    127: "`7, 8` is a list, a hedge; the others took the 8",
    128: "*probably* is no conclusion marker: the answer still names 12 and 13, a hedge",
    132: "`7/8` is one number, 0.875, not a hedge; the others took 8",
    134: "`either 4 or 5` is a hedge; flexible-extract took the last number",
    136: "`1.5e3` is 1500; the others read 1.5 or 3",
    137: "`1.5 × 10^3` is 1500; the others read 10 or 3",
    138: "`1.5*10^3` is 1500; the others read nothing or 3",
    139: "`2.5 \\times 10^{6}` is 2500000; flexible-extract read 6",
    140: "`1e-3` is 0.001; the others read nothing or -3",
    141: "`3 1/2` is 3.5; the others read 1 or 2",
    142: "`3 1/2 cups` is 3.5; the others read 1/2 or 2",
    143: "`2\\frac{1}{4}` is 2.25; the others read 1/4 or 4",
    144: "a choice: `3-1/2` is 3.5 in a recipe but 3 - 1/2 = 2.5 as arithmetic; tunixkit reads "
    "two numbers (a hedge) rather than guess",
    145: "`-3 1/2` is -3.5; the others read 1 or 2",
    146: "`3½` is 3.5; the others read nothing or 3",
    147: "`−$5` is -5; math-verify and flexible-extract dropped the sign",
    148: "`$-5.25` is -5.25; math-verify dropped the sign",
    149: f"`£1,250.50` is 1250.5; math-verify extracted nothing, {STRING}",
    150: "`12 500` is 12500 (space separator); the others read 500",
    152: "`from 3 to 5 days` is a range, a hedge; flexible-extract took the 5",
    153: "known limitation: negation is not read, so `18, not 20` names two numbers, a hedge "
    "(math-verify happened to take the 18)",
    154: "known limitation: a parenthesis is not set apart, so `16 (from 10 to 16)` names 16 and "
    "10, a hedge; setting asides apart would also accept `7 (or 8)`",
    155: "known limitation: the `=` of a check written inside the tag is read as the conclusion "
    "(10); with a gold of 10 it would be a false accept. The format puts checks in `<reasoning>`",
}

# Per LaTeX corpus id: why tunixkit's verdict differs from math-verify's or the human's
WHY_LATEX = {
    29: "two `<answer>` blocks that differ are a hedge; math-verify read the last one",
    36: "an em dash between two plain numbers is a range or a list, a hedge; math-verify accepted"
    " it for the number after the dash",
    37: "`|` between two plain numbers is a list, a hedge; math-verify accepted it for the number"
    " after the bar",
    43: "`0 to 1` is a range, a hedge; math-verify reads *t* and *o* as variables and the product"
    " `0·t·o·1` as 0, so it would pay any range that starts at 0",
    44: "a choice: two plain numbers with a dash between them read as a range (as GSM8K's `7-8`),"
    " so `2 - 1` is a hedge; a person (and math-verify) computes 2 - 1 = 1. A final answer is"
    " rarely an unsimplified difference of two numbers; a range often is one",
}

EXPLANATIONS = bullets(
    "**lm-eval strict-match** only reads `#### N`. Our prompts ask for `<answer>` tags, so it"
    " rejects every tagged answer: it measures whether a model imitates the GSM8K solution format,"
    " not whether it is right.",
    "**lm-eval flexible-extract** takes the *last* number-like string. It fails when anything"
    " follows the answer (`</answer>` is fine, but a check such as `8 + 2 = 10`, units with"
    " numbers, or a trailing `3 pm`), and its `{2,}` pattern keeps a trailing `.` only to have"
    " `exact_match` strip it again. It cannot read fractions, mixed numbers, scientific notation,"
    " percent or `\\boxed{}` content followed by text, and it accepts a hedge whose last number is"
    " the gold (`either 5 or 4`).",
    "**math-verify** parses LaTeX and plain numbers well (fractions, `\\frac`, `\\boxed`,"
    " `\\times 10^{}`) but extracts one expression from the whole completion with no notion of our"
    " `<answer>` tag: it often takes a number of the reasoning (`The answer is 20` over a tagged"
    " 18), it extracts nothing from some plain answers (`0`, `18 dollars`, `18.0`, `**18**`), it"
    " loses the sign of `-$5`, and it accepts a hedge when the number it happens to take is the"
    " gold (`either 4 or 5`).",
    "**tunixkit** follows the policy above. Its misses against the human verdict are listed with"
    " their reasons: number words, clock times, a correction after `\\boxed{}`, 33.333 for 33.33,"
    " untagged text whose last sentence names two numbers, and answers that name a second number"
    " a reader would set aside (`10 in total, from 5 bags`, `18, not 20`, `16 (from 10 to 16)`,"
    " `12 apples and 3 pears`, a check inside the tag). Where the human accepts `3-1/2` it reads a"
    " hedge on purpose. It never accepts a hedge or list of different numbers.",
    "**tunixkit strict** additionally requires the exact tag format, so every untagged or"
    " unterminated answer is rejected on purpose: that is the evaluator's headline accuracy, and"
    " the format the RL rewards teach. Partial accuracy (tunixkit) is reported next to it.",
)

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
