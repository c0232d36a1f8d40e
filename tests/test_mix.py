"""The default public data mix (notebook 06 without TRACES): each data set's converter on rows in
that data set's real schema, written as the parquet files the Hugging Face hub serves, loaded
through the same path as a download (``data.load_rows``)."""

import pandas as pd
import pytest

from tunixkit import data, mix, rewards

DOLLY = [  # databricks/databricks-dolly-15k: instruction, context, response, category
    {
        "instruction": "Write a haiku about rain.",
        "context": "",
        "response": "Soft rain on the roof.",
        "category": "creative_writing",
    },
    {
        "instruction": "Give ideas for a picnic.",
        "context": "",
        "response": "1. Fruit. 2. A ball.",
        "category": "brainstorming",
    },
    {
        "instruction": "Summarize this passage.",
        "context": "Bees make honey from nectar in hives.",
        "response": "Bees turn nectar into honey.",
        "category": "summarization",
    },
    {"instruction": "Summarize it.", "context": "", "response": "?", "category": "summarization"},
    {
        "instruction": "Who wrote Hamlet?",
        "context": "",
        "response": "Shakespeare.",
        "category": "open_qa",
    },
    {
        "instruction": "Write a limerick.",
        "context": "",
        "response": "There once was a cat.",
        "category": "creative_writing",
    },
]
SCIQ = [  # allenai/sciq: question, distractor1-3, correct_answer, support
    {
        "question": "What do plants need to make food?",
        "distractor1": "salt",
        "distractor2": "sand",
        "distractor3": "oil",
        "correct_answer": "light",
        "support": "Plants use light to make food.",
    },
    {
        "question": "What is H2O?",
        "distractor1": "air",
        "distractor2": "fire",
        "distractor3": "rock",
        "correct_answer": "water",
        "support": "",
    },
]
QASC = [  # allenai/qasc: id, question, choices {text, label}, answerKey, fact1, fact2, combinedfact
    {
        "id": "q1",
        "question": "What do plants need to make food?",
        "choices": {"text": ["salt", "light"], "label": ["A", "B"]},
        "answerKey": "B",
        "fact1": "plants make food by photosynthesis",
        "fact2": "Photosynthesis uses light.",
        "combinedfact": "plants need light to make food",
        "formatted_question": "What do plants need to make food? (A) salt (B) light",
    },
    {
        "id": "q2",
        "question": "What is H2O?",
        "choices": {"text": ["air", "water"], "label": ["A", "B"]},
        "answerKey": "B",
        "fact1": "H2O is a molecule",
        "fact2": "Molecules are made of atoms.",
        "combinedfact": "H2O is made of atoms",  # does not state the answer: left out
        "formatted_question": "What is H2O? (A) air (B) water",
    },
]
MBPP = [  # google-research-datasets/mbpp (full): task_id, text, code, test_list, ...
    {
        "task_id": 2,
        "text": "Write a function to add two numbers.",
        "code": "def add(a, b):\n    return a + b",
        "test_list": ["assert add(1, 2) == 3"],
        "test_setup_code": "",
        "challenge_test_list": [],
    },
]


@pytest.fixture
def paths(tmp_path):
    out = {}
    for name, rows in (
        ("databricks/databricks-dolly-15k", DOLLY),
        ("allenai/qasc", QASC),
        ("allenai/sciq", SCIQ),
        ("google-research-datasets/mbpp", MBPP),
    ):
        path = tmp_path / (name.replace("/", "_") + ".parquet")
        pd.DataFrame(rows).to_parquet(path)
        out[name] = str(path)
    return out


def test_the_default_mix_covers_every_judged_domain_and_counts_what_it_skips(paths, capsys):
    traces = mix.load_mix(2, paths=paths)
    said = capsys.readouterr().out
    by = [t["domain"] for t in traces]
    assert by[:5] == ["creative", "ideation", "summarization", "science", "code"]  # interleaved
    assert sorted(by) == ["code", "creative", "creative", "ideation", "science", "summarization"]
    for t in traces:  # with reasoning in the format, or the data set's answer alone, marked
        assert t["response"].endswith("</answer><end_of_turn>"), t
        assert rewards.has_format(t["response"]) != (t.get("reasoned") is False), t
    # no reasoning text the data sets did not write: dolly's and MBPP's rows have none (the model
    # writes it in notebook 06, pipeline.write_reasoning), and no two rows share one
    unreasoned = {t["domain"] for t in traces if t.get("reasoned") is False}
    assert unreasoned == {"creative", "ideation", "summarization", "code"}
    for t in traces:
        if t.get("reasoned") is False:
            assert t["response"].startswith("<answer>") and "<reasoning>" not in t["response"], t
    reasonings = [t["response"].split("</reasoning>")[0] for t in traces if t.get("reasoned", True)]
    assert reasonings and len(set(reasonings)) == len(reasonings), reasonings
    summary = next(t for t in traces if t["domain"] == "summarization")
    assert "Bees make honey" in summary["prompt"]  # the passage travels with the instruction
    code = next(t for t in traces if t["domain"] == "code")
    assert "assert add(1, 2) == 3" in code["prompt"]
    assert code["response"] == "<answer>def add(a, b):\n    return a + b</answer><end_of_turn>"
    science = next(t for t in traces if t["domain"] == "science")
    assert science["response"].startswith(  # the two facts reason, the composed fact answers
        "<reasoning>Plants make food by photosynthesis. Photosynthesis uses light.</reasoning>"
    )
    assert "<answer>Plants need light to make food.</answer>" in science["response"]
    # nothing dropped unsaid: each data set's skipped rows, by reason; the licence rule said
    assert "1 skipped: category 'open_qa' is not a judged domain" in said
    assert "1 skipped: summarization without its passage" in said
    assert "1 skipped: the composed fact does not state the answer" in said
    assert "allenai/sciq: left out (CC BY-NC 3.0, non-commercial" in said
    assert (
        "the mix by domain: {'creative': 2, 'ideation': 1, 'summarization': 1, 'science': 1" in said
    )


def test_a_non_commercial_data_set_joins_the_mix_only_when_asked(paths, capsys):
    traces = mix.load_mix(2, paths=paths, noncommercial=True)
    said = capsys.readouterr().out
    science = [t for t in traces if t["domain"] == "science"]
    assert len(science) == 2 and "left out" not in said  # QASC's, then SciQ's
    assert "<reasoning>Plants use light to make food.</reasoning>" in science[1]["response"]
    assert "1 skipped: no supporting paragraph to reason from" in said
    assert all(s.licence for s in mix.SOURCES)
    assert [s.dataset for s in mix.SOURCES if not s.commercial] == ["allenai/sciq"]


def test_a_data_set_with_no_convertible_row_is_named(paths, tmp_path):
    bad = tmp_path / "qasc.parquet"
    pd.DataFrame([{"q": "x", "a": "y"}]).to_parquet(bad)
    with pytest.raises(data.DataError, match=r"qasc.parquet: none of its 1 rows.*allenai/qasc"):
        mix.load_mix(2, paths=paths | {"allenai/qasc": str(bad)})
