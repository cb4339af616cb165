"""``hf-variants study`` holds the package's own rules, each tested by injecting the fault: a name from a study
file or a flag never leads a write outside ``--output_dir``; every study-file value meets its field's declared check
(the flag's) before anything is written; every record read back is parsed, not trusted; a refused or failed study
never blocks its correction."""

from __future__ import annotations

import dataclasses
import errno
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hf_variants.cli.commands import describe_os_error
from hf_variants.lab.grid import Grid, GridSettings, SelfPretraining
from hf_variants.lab.spec import spec_folder
from hf_variants.lab.study import load_study, run_study
from hf_variants.settings.arguments import checked_value
from hf_variants.settings.study import StudyArguments
from hf_variants.storage.files import CheckpointError, path_component

from .test_experiments import learnable_ag_news

CLI = Path(sys.executable).with_name("hf-variants")
#: The smallest cell of the shipped from-scratch study: one pair's control, two rates, one seed.
SMALLEST = {"pairs": ("mgk_bert",), "seeds": (1,), "learning_rates": (1e-3, 3e-3)}
ESCAPING = "bert_control:a/../../../../ESCAPED=1"


def study_command(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), "study", *arguments, "--data_dir", "data"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def written_files(root: Path) -> set[Path]:
    return {path for path in root.rglob("*")}


# ------------------------------------------------------------------------------------------------ S1: names
@pytest.mark.parametrize(
    ("study", "flags", "named"),
    [
        (f'extends = "classification_from_scratch"\npairs = ["{ESCAPING}"]\n', [], "study.toml: [tasks.ag_news]"),
        ("", ["--pairs", ESCAPING], "argument --pairs: "),
        ('extends = "classification_from_scratch"\n[conditions."../../up"]\n', [],
         "[conditions.../../up] holds a path"),
        ('extends = "classification_from_scratch"\n[conditions.".."]\n', [], "[conditions...] is '.' or '..'"),
    ],
)
def test_a_name_that_would_lead_out_of_the_folder_is_refused_before_anything_is_written(
    tmp_path: Path, study: str, flags: list[str], named: str
) -> None:
    """A pair whose overrides hold ``/`` and ``..`` (in the file or in ``--pairs``) or a condition named ``../..``
    is refused in one line naming the file or flag; nothing is written anywhere (it escaped two levels up before)."""
    learnable_ag_news(tmp_path / "data", rows=40)
    (tmp_path / "study.toml").write_text(study)
    (tmp_path / "deep" / "a").mkdir(parents=True)
    before = written_files(tmp_path)
    result = study_command(tmp_path, "study.toml" if study else "classification_from_scratch", "--tasks", "ag_news",
                           *flags, "--output_dir", "deep/a/out")  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert named in result.stderr.splitlines()[-1], result.stderr
    assert written_files(tmp_path) == before  # no --output_dir, no ESCAPED-1 two levels up


def test_a_grid_built_in_python_refuses_the_same_names() -> None:
    """The checks hold without the study file too: the grid checks each pair where it becomes a folder."""
    (settings,) = [s for _, s in load_study("classification_from_scratch").grids if s.task == "ag_news"]
    with pytest.raises(ValueError, match="is not a field a config override may set"):
        Grid(dataclasses.replace(settings, pairs=(ESCAPING,)), Path("data"), Path("out"))
    with pytest.raises(ValueError, match=r"sizes of '\w+': '__class__' is not a field"):
        Grid(dataclasses.replace(settings, sizes={"__class__": 1}), Path("data"), Path("out"))
    with pytest.raises(ValueError, match=r"task '\.\./x': choose one of"):
        Grid(dataclasses.replace(settings, task="../x"), Path("data"), Path("out"))


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", "a\0b", "x" * 256])
def test_a_path_component_is_one_name_inside_the_folder(name: str) -> None:
    with pytest.raises(ValueError, match=r"^the model 'x' .*: it cannot name a folder"):
        path_component(name, "the model 'x'")


def test_a_spec_folder_is_one_component() -> None:
    assert spec_folder("macaron_bert:layer_norm_position=post") == "macaron_bert__layer_norm_position-post"
    with pytest.raises(ValueError, match="holds a path separator"):
        spec_folder("bert_control:tokenizer=../../x")


# ------------------------------------------------------------------------------------------------ S3: values
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("steps = 0", "[tasks.ag_news]: steps = 0: 0 is below 1"),
        ("steps = -5", "[tasks.ag_news]: steps = -5: -5 is below 1"),
        ("seeds = [-1]", "[tasks.ag_news]: seeds = [-1]: -1 is not a seed; a seed is an integer from 0 to 2**32 - 1"),
        ("seeds = [12345678901234567890]", "seeds = [12345678901234567890]: 12345678901234567890 is not a seed"),
        ("batch_size = 0", "[tasks.ag_news]: batch_size = 0: 0 is below 1"),
        ("learning_rates = [-1.0]", "learning_rates = [-1.0]: -1.0 must be greater than 0"),
        ("heldout_fraction = 2.0", "heldout_fraction = 2.0: 2.0 must lie strictly between 0 and 1"),
        ("max_length = 1", "max_length = 1: 1 is below 2"),
        ("seeds = [1, 1]", "name a value twice"),
    ],
)
def test_a_value_out_of_range_is_refused_naming_the_file_and_the_key(tmp_path: Path, line: str, message: str) -> None:
    """Each value of S3 is refused before anything trains, naming the file, the table, the key and the range."""
    path = tmp_path / "bad.toml"
    path.write_text(f'extends = "classification_from_scratch"\n[tasks.ag_news]\n{line}\n')
    with pytest.raises(ValueError) as raised:
        load_study(path)
    assert str(raised.value).startswith(f"{path}: ") and message in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('extends = "classification_from_scratch"\n[sizes]\n__class__ = 1\n',
         "sizes.__class__ is a private or special"),
        ('extends = "classification_from_scratch"\n[tasks.ag_news]\n_steps = 3\n', "_steps is a private or special"),
        ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nests arrays or tables more than 4 deep"),
        ("x = [[[[[[1]]]]]]\n", "nests arrays or tables more than 4 deep"),
        ('extends = "classification_from_scratch"\n[sizes]\nhidden_sise = 64\n', "has no field 'hidden_sise'"),
        ('extends = "classification_from_scratch"\n[conditions.fast.pretraining]\nsteps = 0\n',
         "[pretraining]: steps = 0: 0 is below 1"),
        ("extends = 3\n", "extends = 3 is not the name or path of a study"),
    ],
)
def test_special_names_deep_nesting_and_unknown_sizes_are_refused(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=None) as raised:
        load_study(path)
    assert message in str(raised.value) and str(raised.value).startswith(str(path))


def test_a_study_file_too_large_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.toml"
    path.write_text("# " + "x" * 300_000 + "\n")
    with pytest.raises(ValueError, match=r"big\.toml: 300,003 bytes; a study file is at most 262,144"):
        load_study(path)


def out_of_range(check) -> object:
    """A value the declared check refuses (the first of a few that fall outside every range it declares)."""
    for value in (-1, 0, 1, 2.5, 150.0, 2**64):
        try:
            check(str(value))
        except Exception:  # argparse's ArgumentTypeError or ValueError: refused
            return value
    raise AssertionError(f"no value found outside {check.__name__}")


@pytest.mark.parametrize("settings_class", [GridSettings, SelfPretraining])
def test_no_study_file_key_bypasses_its_declared_check(tmp_path: Path, settings_class: type) -> None:
    """For every field of the grid's settings that declares a check, a value the check refuses is refused from a
    study file too, naming the key: a field added later meets its check from a file without a line of the loader.
    A number field without a check of its own fails here."""
    declared = {field.name: field.metadata.get("parse") for field in dataclasses.fields(settings_class)}
    numbers = {name for name, field_type in {f.name: f.type for f in dataclasses.fields(settings_class)}.items()
               if any(kind in str(field_type) for kind in ("int", "float"))}  # fmt: skip
    assert {name for name in numbers if declared[name] is None} == set()
    for name, check in declared.items():
        if check is None or name == "task":
            continue
        value = out_of_range(check)
        if settings_class is SelfPretraining:
            table = f"[conditions.fast.pretraining]\n{'' if name == 'steps' else 'steps = 10'}\n{name} = {value!r}\n"
        else:
            table = f"[tasks.ag_news]\n{name} = {[value] if name in ('seeds', 'learning_rates') else value!r}\n"
        path = tmp_path / f"{name}.toml"
        path.write_text(f'extends = "classification_from_scratch"\n{table}'.replace("'", '"'))
        with pytest.raises(ValueError, match=rf"{name} = .*{value}"):
            load_study(path)


def test_a_flag_replaces_the_field_at_every_level_of_the_file(tmp_path: Path) -> None:
    """``--seeds 1`` replaces a task's own ``seeds`` too (a flag the file silently overrode would run other seeds
    than asked), and a flag's value is checked with the file's, naming the flag."""
    path = tmp_path / "study.toml"
    path.write_text('extends = "classification_from_scratch"\n[tasks.ag_news]\nseeds = [7, 8]\n')
    assert {settings.seeds for _, settings in load_study(path).grids} == {(7, 8), (1, 2, 3)}
    assert {settings.seeds for _, settings in load_study(path, replace={"seeds": [1]}).grids} == {(1,)}
    with pytest.raises(ValueError, match=r"\[tasks\.ag_news\] with --pairs: .*layer_norm_position must be one of"):
        load_study(path, replace={"pairs": ["macaron_bert:layer_norm_position=nowhere"]})


def test_the_flag_and_the_file_meet_one_check() -> None:
    """``--seeds -1`` and ``seeds = [-1]`` are refused by the same declared check, with the same words."""
    flags = {field.name: field for field in dataclasses.fields(StudyArguments)}
    grid = {field.name: field for field in dataclasses.fields(GridSettings)}
    for name in ("seeds", "learning_rates"):
        assert flags[name].metadata["parse"] is grid[name].metadata["parse"]
    with pytest.raises(ValueError) as from_python:
        StudyArguments(study="x", output_dir=Path("o"), data_dir=Path("d"), seeds=[-1])
    with pytest.raises(ValueError) as from_file:
        checked_value(GridSettings, "seeds", (-1,))
    assert str(from_file.value) in str(from_python.value)


# ------------------------------------------------------------------------------------------------ S2: records
@pytest.fixture(scope="module")
def finished_grid(tmp_path_factory) -> Path:
    """The smallest cell of the from-scratch study, trained once: ``<root>/data``, ``<root>/records/ag_news``."""
    root = tmp_path_factory.mktemp("grid")
    learnable_ag_news(root / "data", rows=120)
    run_study(load_study("classification_from_scratch", replace=SMALLEST), root / "data", root / "records",
              root / "models", tasks=["ag_news"], roles=["control"])  # fmt: skip
    return root


def copy_grid(finished_grid: Path, tmp_path: Path) -> Path:
    shutil.copytree(finished_grid / "data", tmp_path / "data")
    shutil.copytree(finished_grid / "records", tmp_path / "records", ignore=shutil.ignore_patterns(".hf_variants.lock"))
    return tmp_path / "records" / "ag_news" / "mgk_bert" / "control"


def rerun(tmp_path: Path, **options) -> None:
    run_study(load_study("classification_from_scratch", replace=options.pop("replace", SMALLEST)), tmp_path / "data",
              tmp_path / "records", tmp_path / "models", tasks=["ag_news"], roles=["control"], **options)  # fmt: skip


def edited(path: Path, **changes) -> str:
    return json.dumps({**json.loads(path.read_text()), **changes}, allow_nan=True)


@pytest.mark.parametrize(
    ("name", "damage", "message"),
    [
        ("seed1.json", lambda path: "[1, 2]", "must hold a JSON object, not an array"),
        ("seed1.json", lambda path: "null", "must hold a JSON object, not null"),
        ("seed1.json", lambda path: edited(path, accuracy="high"), "field 'accuracy' must be a finite number"),
        ("seed1.json", lambda path: '{"learning_rate": 0.001}', "field 'status' is missing"),
        ("seed1.json", lambda path: edited(path, accuracy=math.nan), "field 'accuracy' must be a finite number"),
        ("seed1.json", lambda path: edited(path, seed=2), "field 'seed' holds 2, not this run's 1"),
        ("sweep-lr0.003-seed1.json", lambda path: edited(path, accuracy=7.5),
         "field 'accuracy' must lie in [0, 1], not 7.5"),
        ("sweep-lr0.001-seed1.json", lambda path: edited(path, status=3),
         "field 'status' must be a string, not a number"),
    ],
)
def test_a_damaged_record_is_named_in_one_line_and_the_rerun_trains_it_again(
    finished_grid: Path, tmp_path: Path, name: str, damage, message: str
) -> None:
    """S2: a record altered since it was written is never trusted (no accuracy of 7.5 wins the rate choice, no
    record holding only a rate counts as a finished run) nor crashed on: one line naming the file, the field and
    what re-runs it; deleting the file, as it says, trains that run again."""
    cell = copy_grid(finished_grid, tmp_path)
    (cell / name).write_text(damage(cell / name))
    with pytest.raises(CheckpointError) as raised:
        rerun(tmp_path)
    text = str(raised.value)
    assert "\n" not in text and str(cell / name) in text and message in text, text
    assert "delete that file and run the same command" in text
    (cell / name).unlink()
    rerun(tmp_path)
    record = json.loads((cell / name).read_text())
    assert record["status"] == "finished" and 0 <= record["accuracy"] <= 1


def test_a_record_that_is_a_link_is_refused_and_its_target_never_read_as_a_run(finished_grid: Path,
                                                                                 tmp_path: Path) -> None:  # fmt: skip
    cell = copy_grid(finished_grid, tmp_path)
    outside = tmp_path / "outside.json"
    outside.write_text((cell / "seed1.json").read_text())  # a well-formed record, but not one this grid wrote
    (cell / "seed1.json").unlink()
    (cell / "seed1.json").symlink_to(outside)
    result = subprocess.run([str(CLI), "study", "classification_from_scratch", "--tasks", "ag_news", "--pairs",
                             "mgk_bert", "--roles", "control", "--seeds", "1", "--learning_rates", "1e-3", "3e-3",
                             "--data_dir", "data", "--output_dir", "records"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=600)  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()[-1:]
    assert "seed1.json is a symbolic link" in line and line.startswith("hf-variants study: error: ")
    assert outside.read_text() == (cell / "seed1.json").read_text()  # untouched


# ------------------------------------------------------------------------------------------------ correction
def test_a_grid_that_recorded_no_run_never_blocks_its_correction(finished_grid: Path, tmp_path: Path,
                                                                 caplog) -> None:  # fmt: skip
    """A folder whose grid stopped before its first run's record (other settings) is replaced, with a warning."""
    cell = copy_grid(finished_grid, tmp_path)
    for path in cell.parent.parent.glob("*/*/s*.json"):  # every cell's sweep-lr*, seed*: stopped before its first run
        path.unlink()
    rerun(tmp_path, replace={**SMALLEST, "seeds": (2,)})
    assert "recorded no run" in caplog.text
    assert sorted(path.name for path in cell.iterdir()) == ["seed2.json", "sweep-lr0.001-seed2.json",
                                                            "sweep-lr0.003-seed2.json"]  # fmt: skip


def test_another_grid_with_records_is_refused_and_replaced_only_with_overwrite(finished_grid: Path,
                                                                               tmp_path: Path) -> None:  # fmt: skip
    """Another grid's run records are kept unless ``--overwrite_output_dir``, which removes only what a grid
    writes: a file of the user's in the folder is kept."""
    cell = copy_grid(finished_grid, tmp_path)
    (cell.parent.parent / "notes.txt").write_text("mine")
    other = {**SMALLEST, "seeds": (2,)}
    with pytest.raises(CheckpointError, match=r"holds another grid .*seeds.* --overwrite_output_dir to replace"):
        rerun(tmp_path, replace=other)
    assert (cell / "seed1.json").is_file()
    rerun(tmp_path, replace=other, overwrite=True)
    assert sorted(path.name for path in cell.iterdir()) == ["seed2.json", "sweep-lr0.001-seed2.json",
                                                            "sweep-lr0.003-seed2.json"]  # fmt: skip
    assert (cell.parent.parent / "notes.txt").read_text() == "mine"


# ------------------------------------------------------------------------------------------------ messages
@pytest.mark.parametrize(
    ("code", "words"),
    [(errno.EEXIST, "a file or folder is already there"), (errno.ENOTDIR, "a file stands where a folder is needed"),
     (errno.EISDIR, "a folder stands where a file is needed")],
)
def test_an_operating_system_error_is_told_in_words(code: int, words: str) -> None:
    text = describe_os_error(OSError(code, "raw", "some/path"))
    assert text == f"some/path: {words}" and "Errno" not in text


def test_a_file_in_place_of_the_output_folder_is_one_line_in_words(tmp_path: Path) -> None:
    learnable_ag_news(tmp_path / "data", rows=40)
    (tmp_path / "taken").write_text("a file")
    result = study_command(tmp_path, "classification_from_scratch", "--tasks", "ag_news", "--output_dir", "taken/out")
    assert result.returncode == 1 and "Traceback" not in result.stderr and "Errno" not in result.stderr
    assert "a file stands where a folder is needed" in result.stderr.strip().splitlines()[-1], result.stderr


@pytest.mark.parametrize(("command", "says"), [("export", "the export is written again from the start"),
                                               ("study", "keeping every finished run's record")])  # fmt: skip
def test_a_full_disk_says_what_running_the_command_again_does(monkeypatch, capsys, command: str, says: str) -> None:
    """The full-disk line speaks of each command's own recovery: an export has no checkpoint to resume from."""
    from hf_variants.cli import commands

    def full(argv: list[str]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "out/model.safetensors")

    monkeypatch.setitem(commands.COMMANDS, command, commands.Command("", full))
    with pytest.raises(SystemExit):
        commands.main([command])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"hf-variants {command}: error: the disk is full (out/model.safetensors: ") and says in line
    assert "checkpoint" not in line
