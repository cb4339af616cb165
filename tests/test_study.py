"""Studies as data files (:mod:`hf_variants.lab.study`): the shipped ones are the committed grids' settings, a
wrong field is named with its file before anything runs, and docs/extending.md's worked example runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hf_variants.lab.study import load_study

from .helpers import REPO_ROOT, run_python
from .test_experiments import learnable_ag_news

COMMITTED_GRID = REPO_ROOT / "docs" / "experiments" / "classification"


@pytest.mark.parametrize("task", ["ag_news", "listops", "imdb"])
def test_the_from_scratch_study_is_the_committed_grids_settings(task: str) -> None:
    """The shipped file declares what the committed grid was run with (only the engine, which trains each run,
    changed since; the fingerprint names it)."""
    (settings,) = [s for _, s in load_study("classification_from_scratch").grids if s.task == task]
    committed = json.loads((COMMITTED_GRID / task / "run_fingerprint.json").read_text())
    assert {k: v for k, v in settings.fingerprint().items() if k != "engine"} == committed


def test_conditions_and_extends_give_one_grid_per_condition_and_task() -> None:
    study = load_study("never_from_scratch")
    assert [(condition, s.task) for condition, s in study.grids][:2] == [("scratch", "ag_news"), ("scratch", "listops")]
    assert {s.task for _, s in study.grids} == {"ag_news", "listops", "imdb", "sst2"}
    scratch = {s.task: s for c, s in study.grids if c == "scratch"}
    pretrained = {s.task: s for c, s in study.grids if c == "self_pretrained"}
    for task, settings in scratch.items():  # one thing changes between the conditions
        assert settings.pretraining is None and pretrained[task].pretraining.steps == settings.steps
        assert {k: v for k, v in pretrained[task].fingerprint().items() if k != "pretraining"} == settings.fingerprint()
        assert settings.seeds == (1, 2, 3, 4, 5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("pairs = ['mgk_bert']\nlearning_rate = [1e-3]\n", r"bad\.toml: a study has no field 'learning_rate'"),
        ("pairs = ['mgk_bert']\n[tasks.ag_news]\nsteps = 3\nmax_lenght = 9\n",
         r"bad\.toml: \[tasks\.ag_news\] has no field 'max_lenght'"),
        ("pairs = ['mgk_bert']\n[tasks.glue]\nsteps = 3\n", r"bad\.toml: \[tasks\.glue\]: choose tasks among"),
        ("pairs = ['mgk_bert']\nlearning_rates = [1e-3]\nseeds = [1]\nbatch_size = 8\n[tasks.ag_news]\nsteps = 3\n"
         "max_length = 9\n[pretraining]\nstep = 3\n", r"bad\.toml: \[pretraining\] has no field 'step'"),
        ("pairs = ['mgk_bert']\n[tasks.ag_news]\nsteps = 3\n", r"bad\.toml: \[tasks\.ag_news\] misses a field"),
        ("pairs = ['mgk_bert'\n", r"bad\.toml: not valid TOML"),
        ("extends = 'bad'\n", r"bad\.toml: extends itself"),
    ],
)
def test_a_wrong_study_file_is_named_before_anything_runs(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text.replace("'bad'", repr(str(path))))
    with pytest.raises(ValueError, match=message):
        load_study(path)


def test_an_unknown_study_name_lists_the_shipped_ones() -> None:
    with pytest.raises(FileNotFoundError, match=r"No study 'never'.*classification_from_scratch, never_from_scratch"):
        load_study("never")


def test_the_worked_example_of_a_new_study_runs(tmp_path: Path) -> None:
    """docs/extending.md's study file and the Python that runs it, as a user would: two conditions, their
    results paired by seed in the comparison table, the pretrained models outside the results."""
    page = (REPO_ROOT / "docs" / "extending.md").read_text()
    (study,) = re.findall(r"```toml\n(.*?)```", page, flags=re.DOTALL)
    (code,) = [block for block in re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL) if "run_study" in block]
    (tmp_path / "my_study.toml").write_text(study)
    learnable_ag_news(tmp_path / "data", rows=120)
    result = run_python(code, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "| ag_news | MGK attention vs softmax (same heads, head_dim) |" in result.stdout, result.stdout[-3000:]
    for condition in ("scratch", "self_pretrained"):
        cell = tmp_path / "results" / condition / "ag_news" / "mgk_bert" / "variant"
        records = sorted(path.name for path in cell.iterdir())
        assert records == ["choice.json", "seed1.json", "seed2.json", "sweep-lr0.001.json"]
    seed = json.loads((tmp_path / "results" / "self_pretrained" / "ag_news" / "mgk_bert" / "control" / "seed2.json")
                      .read_text())  # fmt: skip
    assert seed["pretraining"]["corpus"] == "train" and seed["status"] in ("finished", "diverged")
    assert not list((tmp_path / "results").rglob("*.safetensors"))  # models live under models/, not the results
    assert list((tmp_path / "models" / "self_pretrained").rglob("model.safetensors"))
