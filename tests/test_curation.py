"""The curation pass (tunixkit.curation, notebook 08): a pass stopped part way goes on from the
next prompt and ends as an unbroken one does; a kill that cut the last line costs that prompt
only; another pass's folder is refused; a later session re-filters without sampling again; the
curated file is 06's TRACES as it is."""

import dataclasses
import json
import os
import pathlib
import stat

import pytest

from tunixkit import curation, data, domains, evaluation, judging, models, runtime, testing

SAMPLING = dataclasses.replace(
    evaluation.EvalConfig.smoke(), batch_size=8, temperature=0.7, top_p=1.0, max_generation_steps=24
)
CHUNK = 4  # prompts a chunk


@pytest.fixture(scope="module")
def setup():
    made = testing.synthetic_tasks(12, seed=3)
    tasks = testing.uneven([t.record() for t in made], 0.5)  # half the data's answers weak
    loaded = models.load_model("tiny-gemma3-sft", mesh=runtime.make_mesh(), verbose=False)
    return loaded, tasks, testing.rubric_grader(made)


class Killed(BaseException):  # as a kill: nothing in the pass catches it
    pass


def _judge(grader, *, calls_before_kill=None):
    """The smoke rubric as the judge; with ``calls_before_kill``, the session dies in the judge's
    next call after that many (an event of the pass, not a time)."""
    calls = []

    def grade(questions, completions):
        if calls_before_kill is not None and len(calls) >= calls_before_kill:
            raise Killed("the session died here")
        calls.append(len(questions))
        return grader(questions, completions)

    return judging.Judge(grade, name="judge"), calls


def _curate(loaded, tasks, judge, folder, **kw):
    kw.setdefault("filters", curation.Filters(min_score=0.7))
    return curation.curate(
        loaded,
        tasks,
        judge,
        SAMPLING,
        folder,
        samples=2,
        model="tiny-gemma3-sft",
        judged_by="the smoke rubric",
        chunk=CHUNK,
        **kw,
    )


def test_a_pass_stopped_part_way_goes_on_and_ends_as_an_unbroken_one(setup, tmp_path):
    loaded, tasks, grader = setup
    whole = _curate(loaded, tasks, _judge(grader)[0], tmp_path / "whole")
    assert len(whole) == len(tasks)
    assert all(len(d["candidates"]) == 3 for d in whole)  # 2 samples + the data's answer
    kept = curation.report(whole)["domains"]["all"]["kept"]
    assert 0 < kept < len(tasks)  # the weak answers are left out, the good ones kept

    judge, _ = _judge(grader, calls_before_kill=2)
    with pytest.raises(Killed):
        _curate(loaded, tasks, judge, tmp_path / "killed")
    assert len(curation.read_candidates(tmp_path / "killed")) == 2 * CHUNK  # two chunks kept
    judge, calls = _judge(grader)
    again = _curate(loaded, tasks, judge, tmp_path / "killed")
    assert len(calls) == 1  # only the last chunk was answered and judged again
    assert again == whole
    for name in ("curated.jsonl", "candidates.jsonl"):
        assert (tmp_path / "killed" / name).read_text() == (tmp_path / "whole" / name).read_text()

    # the curated file is 06's TRACES as it is, with its provenance
    traces = domains.load_traces(str(tmp_path / "whole" / "curated.jsonl"))
    assert len(traces) == kept and {"domain", "prompt", "response"} <= set(traces[0])
    rows = data.read_rows(tmp_path / "whole" / "curated.jsonl")
    assert {r["model"] for r in rows} == {"tiny-gemma3-sft"} and all(
        r["score"] >= 0.7 for r in rows
    )
    assert all(r["response"] not in testing.WEAK.values() for r in rows)


def test_a_cut_last_line_costs_that_prompt_only(setup, tmp_path):
    loaded, tasks, grader = setup
    first = _curate(loaded, tasks[:CHUNK], _judge(grader)[0], tmp_path / "pass")
    path = tmp_path / "pass" / "candidates.jsonl"
    with path.open("a") as f:  # a kill while the next chunk was appended
        f.write('{"domain": "math", "prompt": "cut he')
    judge, calls = _judge(grader)
    done = _curate(loaded, tasks[: 2 * CHUNK], judge, tmp_path / "pass")
    assert done[:CHUNK] == first and len(done) == 2 * CHUNK and len(calls) == 1
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_a_last_line_cut_just_before_its_newline_is_redone_too(setup, tmp_path):
    loaded, tasks, grader = setup
    _curate(loaded, tasks[:CHUNK], _judge(grader)[0], tmp_path / "pass")
    path = tmp_path / "pass" / "candidates.jsonl"
    path.write_bytes(path.read_bytes()[:-1])  # the whole last line, but not its newline
    judge, calls = _judge(grader)
    done = _curate(loaded, tasks[: 2 * CHUNK], judge, tmp_path / "pass")
    assert len(done) == 2 * CHUNK and len(calls) == 2  # the cut chunk's last prompt, the next
    assert len(path.read_text().splitlines()) == 2 * CHUNK


def test_a_resume_from_without_a_pass_is_an_error(setup, tmp_path):
    loaded, tasks, grader = setup
    with pytest.raises(data.DataError, match=r"no curation pass to continue"):
        _curate(loaded, tasks, _judge(grader)[0], tmp_path / "pass", earlier=tmp_path / "nothing")


def test_another_pass_s_folder_is_refused(setup, tmp_path):
    loaded, tasks, grader = setup
    _curate(loaded, tasks[:CHUNK], _judge(grader)[0], tmp_path / "pass")
    with pytest.raises(data.DataError, match=r"candidates.jsonl, line 1: its prompt is not task 1"):
        _curate(loaded, tasks[CHUNK:], _judge(grader)[0], tmp_path / "pass")


def test_a_later_session_continues_and_re_filters_without_sampling(setup, tmp_path):
    loaded, tasks, grader = setup
    earlier = tmp_path / "session1" / "curated"
    done = _curate(loaded, tasks[:CHUNK], _judge(grader)[0], earlier)
    for f in earlier.iterdir():  # a Kaggle input is read-only
        os.chmod(f, stat.S_IRUSR)
    os.chmod(earlier, stat.S_IRUSR | stat.S_IXUSR)
    judge, calls = _judge(grader)
    looser = curation.Filters(min_score=0.0, exact_format=False)
    again = _curate(
        loaded,
        tasks[:CHUNK],
        judge,
        tmp_path / "session2" / "curated",
        earlier=earlier,
        filters=looser,
    )
    assert calls == []  # nothing sampled or judged again
    assert [c["score"] for d in again for c in d["candidates"]] == [
        c["score"] for d in done for c in d["candidates"]
    ]
    kept = [curation.report(x)["domains"]["all"]["kept"] for x in (done, again)]
    assert kept[1] == CHUNK > kept[0]  # every prompt has an answer that passes the looser filters
    os.chmod(earlier, stat.S_IRWXU)


def test_the_report_names_why_prompts_were_left_out(setup, tmp_path):
    loaded, tasks, grader = setup
    done = _curate(loaded, tasks[:CHUNK], _judge(grader)[0], tmp_path / "pass")
    summary = curation.report(done)
    left = summary["domains"]["all"]["prompts"] - summary["domains"]["all"]["kept"]
    assert sum(summary["left_out_because"].values()) == left
    assert set(summary["left_out_because"]) <= set(curation.REASONS)
    assert sum(summary["kept_from"].values()) == summary["domains"]["all"]["kept"]
    assert "| all |" in curation.table(summary)
    curation.plot(done, tmp_path / "curation.png")
    assert pathlib.Path(tmp_path / "curation.png").stat().st_size > 0
