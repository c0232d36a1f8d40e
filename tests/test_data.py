"""Data loaders: one schema from every file type; errors name the file and line; skips are reported."""

import dataclasses
import json

import pytest

from tunixkit import data, families, testing


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet"])
def test_every_file_format_gives_the_same_records(tmp_path, fmt):
    rows = testing.synthetic_gsm8k(20, seed=2)
    path = tmp_path / f"d.{fmt}"
    if fmt == "jsonl":
        data.write_jsonl(rows, path)
    elif fmt == "json":
        path.write_text(json.dumps(rows))
    elif fmt == "csv":
        import csv

        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, ["question", "answer"])
            w.writeheader()
            w.writerows(rows)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    records = data.load_gsm8k("train", source="file", path=str(path))
    assert records == data.to_records(rows, "ref", verbose=False)[0]


def test_bad_json_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "q", "answer": "#### 1"}\n{oops\n')
    with pytest.raises(data.DataError, match=r"bad.jsonl:2: invalid JSON"):
        data.read_rows(path)


def test_csv_without_answer_column(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("question,solution\nq,s\n")
    with pytest.raises(data.DataError, match=r"x.csv:1: header lacks column\(s\) \['answer'\]"):
        data.read_rows(path, ("question", "answer"))
    assert data.read_rows(path) == [
        {"question": "q", "solution": "s"}
    ]  # other files, other columns


def test_rows_without_answers_are_counted_not_dropped_silently(capsys):
    rows = [
        {"question": "a", "answer": "steps\n#### 3"},
        {"question": "b", "answer": "no final"},
        {"question": "", "answer": "#### 1"},
    ]
    records, report = data.to_records(rows, "mem")
    assert [r["answer"] for r in records] == ["3"]
    assert report.skipped == [
        (2, "no parseable '#### <number>' answer"),
        (3, "empty or missing 'question'"),
    ]
    assert "2 skipped" in capsys.readouterr().out


def test_grpo_batches_are_numpy_dicts():
    records, _ = data.to_records(testing.synthetic_gsm8k(10), "s", verbose=False)
    ds = data.grpo_dataset(records, batch_size=4, num_batches=5)
    assert len(ds) == 5
    batch = ds[0]
    assert set(batch) == {"prompts", "question", "answer"} and batch["prompts"].shape == (4,)
    assert batch["prompts"][0].startswith("<start_of_turn>user\n")


def test_a_family_entry_brings_its_own_chat_template(monkeypatch):
    """A next family (here ChatML, as Qwen writes it) is one entry: prompts, targets and GRPO
    batches come out in its template, with its system role and end-of-turn piece."""
    chat = families.ChatTemplate(
        "<|im_start|>", "<|im_end|>", "user", "assistant", system_in_user_turn=False
    )
    entry = dataclasses.replace(families.get("gemma3"), name="chatml", chat=chat)
    monkeypatch.setitem(families.FAMILIES, "chatml", entry)
    record = {"question": "1+1?", "solution": "1 plus 1 is 2.", "answer": "2"}
    prompt, target = data.sft_pair(record, "Be brief.", family="chatml")
    assert prompt == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n1+1?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert target == "<reasoning>1 plus 1 is 2.</reasoning>\n<answer>2</answer><|im_end|>"
    assert entry.end_of_turn == "<|im_end|>"
    batch = data.grpo_dataset([record], batch_size=1, system_prompt="Be brief.", family="chatml")[0]
    assert batch["prompts"][0] == prompt
    assert data.sft_pair(record, "Be brief.")[0].startswith(
        "<start_of_turn>user\nBe brief.\n\n1+1?"
    )


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_empty_file_is_an_error_naming_it(tmp_path, fmt):
    path = tmp_path / f"empty.{fmt}"
    path.write_text({"jsonl": "\n\n", "json": "[]", "csv": "question,answer\n"}[fmt])
    with pytest.raises(data.DataError, match=rf"empty.{fmt}: no records"):
        data.load_gsm8k("train", source="file", path=str(path))


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv"])
def test_non_utf8_file_names_file_and_line(tmp_path, fmt):
    path = tmp_path / f"latin1.{fmt}"
    good = {
        "jsonl": '{"question": "q", "answer": "#### 1"}\n',
        "json": "[\n",
        "csv": "question,answer\n",
    }[fmt]
    bad = {
        "jsonl": '{"question": "caf\u00e9", "answer": "#### 2"}\n',
        "json": '{"question": "caf\u00e9"}]\n',
        "csv": "caf\u00e9,#### 2\n",
    }[fmt]
    path.write_bytes(good.encode() + bad.encode("latin-1"))
    with pytest.raises(data.DataError, match=rf"latin1.{fmt}:2: not UTF-8 text"):
        data.read_rows(path)


def test_a_failed_download_says_what_to_do_instead(monkeypatch):
    from tunixkit import data, runtime

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # as on Kaggle with the Internet off
    with pytest.raises(runtime.DownloadError, match=r"openai/gsm8k .*Internet on.*source='file'"):
        data.load_gsm8k("train", source="hf")
    # a notebook's own loader names the notebook's parameter
    from tunixkit import recipes

    full = runtime.resolve("full", verbose=False)
    with pytest.raises(runtime.DownloadError, match=r"Internet on.*set GSM8K_PATH to it"):
        recipes.gsm8k(full, "train", data_dir=".")


def test_every_notebook_data_download_names_its_parameter(monkeypatch):
    """01's DATASET, 03's PAIRS, 06's TRACES and MIX_PATHS: offline, the error says which notebook
    parameter points at a local copy (not the library call)."""
    import pathlib

    from tunixkit import data, runtime

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(runtime.DownloadError, match=r"Internet on.*set DATASET to its path"):
        with runtime.parameter_for_a_copy("DATASET"):
            data.load_rows("someone/some-sft-set", "train")
    root = pathlib.Path(__file__).resolve().parents[1]
    for where, parameter in (  # 06's tasks are loaded by its recipe's pipeline_tasks
        ("notebooks/01_qlora_sft.py", "DATASET"),
        ("notebooks/03_dpo.py", "PAIRS"),
        ("tunixkit/recipes/multidomain_pipeline.py", "TRACES"),
        ("tunixkit/recipes/multidomain_pipeline.py", "MIX_PATHS"),
    ):
        assert f'runtime.parameter_for_a_copy("{parameter}"' in (root / where).read_text(), where


def test_a_gated_model_that_refuses_names_its_consent_page(monkeypatch):
    """A 403 from the hub is a licence not accepted, not a missing network: the error names the
    model's page instead of asking to turn the Internet on."""
    from tunixkit import models, runtime

    class Forbidden(OSError):
        response = type("Response", (), {"status_code": 403})()

    def refuse(*args, **kwargs):
        raise Forbidden("403 Client Error: Forbidden for url")

    import kagglehub

    monkeypatch.setattr(kagglehub, "model_download", refuse)
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")  # on Kaggle: no credentials asked
    spec = models.get_spec("gemma-3-1b-it")
    with pytest.raises(runtime.DownloadError) as err:
        models._download(spec, "gemma-3-1b-it", "kaggle")
    assert "access refused" in str(err.value), err.value
    assert "https://www.kaggle.com/models/google/gemma-3" in str(err.value)
    assert "Turn the Internet on" not in str(err.value)


def test_a_preference_data_set_smaller_than_the_held_out_part_is_refused(tmp_path):
    from tunixkit import data, preferences, testing

    pairs = testing.write_preference_rows(tmp_path / "pairs.parquet", 10)
    with pytest.raises(
        data.DataError, match=r"pairs.parquet: 10 preference pairs, .* holds out the first 128"
    ):
        preferences.training_pairs(tmp_path / "out", str(pairs), heldout=128)
    got = preferences.training_pairs(tmp_path / "out", str(pairs), heldout=4)
    assert (len(got["train"]), len(got["heldout"])) == (6, 4)
    assert got["train"][0]["prompt"].startswith("<start_of_turn>user")


def test_a_hugging_face_split_is_sliced_not_read_whole(monkeypatch, tmp_path):
    import datasets

    asked = []

    def load_dataset(path, name=None, split=None):
        asked.append(split)
        return [{"prompt": "p", "response": "r"}] * 3

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    assert len(data.load_rows("someone/traces", "train", limit=3)) == 3
    assert data.load_rows("someone/traces", "train") and asked == ["train[:3]", "train"]
    path = tmp_path / "rows.jsonl"  # a local file gives its first rows too
    path.write_text("".join(f'{{"prompt": "p{i}", "response": "r"}}\n' for i in range(5)))
    assert [r["prompt"] for r in data.load_rows(str(path), limit=2)] == ["p0", "p1"]
