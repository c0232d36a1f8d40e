"""THE answer format and the system prompts: the one home of both.

Every notebook trains and judges answers as ``<reasoning>...</reasoning>`` then
``<answer>...</answer>``, closed by the model's end of turn. Here are the tags, the system prompts
(GSM8K's, the judged domains' of notebook 06, the calculator's of notebook 07 with its short tool
description), and the three functions that write the format: :func:`format_prompt` (a question in
a family's chat template), :func:`format_completion` (a target answer) and :func:`end_turn`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tunixkit import families

__all__ = [
    "CALCULATOR_SYSTEM_PROMPT",
    "DOMAINS_SYSTEM_PROMPT",
    "LATEX_MATH_SYSTEM_PROMPT",
    "MATH_SYSTEM_PROMPT",
    "REASONING_START",
    "SHORT_TOOL_PROMPT",
    "end_turn",
    "format_completion",
    "format_prompt",
]

REASONING_START, REASONING_END = "<reasoning>", "</reasoning>"
ANSWER_START, ANSWER_END = "<answer>", "</answer>"
START_OF_TURN, END_OF_TURN = families.GEMMA_CHAT.turn_start, families.GEMMA_CHAT.end_of_turn
MATH_SYSTEM_PROMPT = (  # GSM8K: one number in the answer
    f"You are given a problem. Think about the problem and provide your reasoning. Place it "
    f"between {REASONING_START} and {REASONING_END}. Then, provide the final answer (i.e., just "
    f"one numerical value) between {ANSWER_START} and {ANSWER_END}."
)
LATEX_MATH_SYSTEM_PROMPT = (  # MATH, MATH-500: the answer in LaTeX (a fraction, an interval, a set)
    f"You are given a problem. Think about the problem and provide your reasoning. Place it "
    f"between {REASONING_START} and {REASONING_END}. Then, provide the final answer (just the "
    f"answer, in LaTeX, e.g. \\frac{{3}}{{4}}) between {ANSWER_START} and {ANSWER_END}."
)
# The judged domains (notebook 06): any answer, reasoning first.
DOMAINS_SYSTEM_PROMPT = (
    "Answer the request. Think first and put your reasoning between <reasoning> and </reasoning>, "
    "then give the answer between <answer> and </answer>."
)
# The calculator's (notebook 07).
CALCULATOR_SYSTEM_PROMPT = (
    "Solve the problem. To compute, call the calculator tool. Then give your reasoning between "
    "<reasoning> and </reasoning> and the number between <answer> and </answer>.\n"
)
# A short tool description for small models (the JSON-schema prompt tunix writes is ~120 tokens).
SHORT_TOOL_PROMPT = (
    'Call it as <tool_call>{"name": "calculator", "arguments": {"expression": "..."}}</tool_call>'
)


def format_prompt(
    question: str, system_prompt: str | None = MATH_SYSTEM_PROMPT, *, family: str = "gemma3"
) -> str:
    """The ``family``'s chat prompt (no BOS; the tokenizer adds it), ending where the model speaks.

    Gemma has no system role: the system prompt opens the user turn, as Gemma's template does.
    Code holding a loaded model writes ``loaded.chat.prompt(...)`` (its own family's template).

    >>> print(format_prompt("1+1?", system_prompt=None))
    <start_of_turn>user
    1+1?<end_of_turn>
    <start_of_turn>model
    <BLANKLINE>
    """
    return families.get(family).chat.prompt(question, system_prompt)


def format_completion(reasoning: str | None, answer: str, *, family: str = "gemma3") -> str:
    """The target completion in the reasoning format, closed by the family's end of turn;
    ``reasoning`` None: the answer alone (a data set's answer that carries no reasoning: a
    reference to judge against, not a target).

    >>> format_completion("2 plus 2 is 4.", "4")
    '<reasoning>2 plus 2 is 4.</reasoning>\\n<answer>4</answer><end_of_turn>'
    >>> format_completion(None, "4")
    '<answer>4</answer><end_of_turn>'
    """
    end = families.get(family).end_of_turn
    answered = f"{ANSWER_START}{answer}{ANSWER_END}{end}"
    return (
        answered
        if reasoning is None
        else f"{REASONING_START}{reasoning}{REASONING_END}\n{answered}"
    )


def end_turn(completion: str, *, family: str = "gemma3") -> str:
    """``completion`` closed by the family's end of turn, which SFT must teach (without it answers
    run on to the generation limit); a completion that has it is returned as it is.

    >>> end_turn("<answer>4</answer>"), end_turn("<answer>4</answer><end_of_turn>")
    ('<answer>4</answer><end_of_turn>', '<answer>4</answer><end_of_turn>')
    """
    end = families.get(family).end_of_turn
    return completion if completion.rstrip().endswith(end) else completion.rstrip() + end


def _without_system(i: int, share: float) -> bool:
    """Whether row ``i`` trains without the system prompt, for ``share`` of the rows spread evenly:
    the judges' own prompt may not carry ours, and a model that only ever saw it may drop the
    answer format without it.

    >>> [_without_system(i, 0.25) for i in range(8)], _without_system(3, 0.0)
    ([False, False, False, True, False, False, False, True], False)
    """
    return int((i + 1) * share) > int(i * share)


def sft_pairs(
    rows: Sequence[Mapping[str, str]],
    system_prompt: str | None,
    *,
    family: str = "gemma3",
    plain_share: float = 0.0,
) -> list[tuple[str, str]]:
    """SFT's (prompt, target) pairs of ``rows`` (``prompt``, ``response``): the prompt in the
    family's chat template with ``system_prompt``, except for ``plain_share`` of the rows spread
    evenly (:func:`_without_system`); every target ends its turn (:func:`end_turn`), so that the
    model learns to stop. How many targets lacked the end of turn, and how many prompts go
    without the system prompt, is printed.

    >>> rows = [{"prompt": "1+1?", "response": "<answer>2</answer>"}] * 2
    >>> [(p.count("Be brief"), t) for p, t in sft_pairs(rows, "Be brief.", plain_share=0.5)]
    SFT targets: 2 (end of turn added to 2; 1 without the system prompt, plain_share 0.5)
    [(1, '<answer>2</answer><end_of_turn>'), (0, '<answer>2</answer><end_of_turn>')]
    """
    plain = [_without_system(i, plain_share) for i in range(len(rows))]
    pairs = [
        (
            format_prompt(r["prompt"], None if bare else system_prompt, family=family),
            end_turn(r["response"], family=family),
        )
        for r, bare in zip(rows, plain, strict=True)
    ]
    lacking = sum(r["response"] != target for r, (_, target) in zip(rows, pairs, strict=True))
    print(
        f"SFT targets: {len(pairs)} (end of turn added to {lacking}; {sum(plain)} without the "
        f"system prompt, plain_share {plain_share:g})"
    )
    return pairs
