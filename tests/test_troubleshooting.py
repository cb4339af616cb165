"""Every message the Troubleshooting page quotes is one the commands print: each quote, read from the page with its
placeholders (``...``, ``N``, ``X``, ``FILE``) as wildcards, is provoked here by the mistake the page describes and
found in what the command said. A quote without its provocation fails, so the page cannot quote a message that no
command prints."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from hf_variants.cli.commands import main as cli_main
from hf_variants.storage import run_folder
from hf_variants.tokenization import train_wordpiece_tokenizer

from .helpers import REPO_ROOT
from .mlm_helpers import mlm_args
from .test_experiments import learnable_ag_news

PAGE = REPO_ROOT / "docs" / "troubleshooting.md"
#: A quoted message: a bold code span ending its sentence, optionally followed by ``/ another form``.
QUOTE = re.compile(r"\*\*`([^*\n]+?)`(?: / [^*\n]*)?\.\*\*")
#: A placeholder of the page's quotes → what it stands for in a message.
PLACEHOLDERS = {"...": ".*", "N": r"\d+", "X": r"\S+", "FILE": r"\S+", "'x'": r"'\w+'"}
PLACEHOLDER = re.compile(r"(\.\.\.|'x'|\b(?:N|X|FILE)\b)")


def page_quotes() -> list[str]:
    return QUOTE.findall(PAGE.read_text(encoding="utf-8"))


def pattern(quote: str) -> re.Pattern:
    """The quote as a regular expression: its text literal, its placeholders wildcards."""
    parts = PLACEHOLDER.split(quote)  # literal text at even positions, placeholders at odd ones
    return re.compile("".join(PLACEHOLDERS[part] if index % 2 else re.escape(part) for index, part in enumerate(parts)))


def said(argv: list[str], capsys: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture) -> str:
    """What ``hf-variants ARGV`` printed and logged (a refusal is one line and exit status 1, or 2 for a command
    line the parser refuses)."""
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        try:
            cli_main(argv)
        except SystemExit as exit_:
            assert exit_.code in (1, 2), exit_.code
    printed = capsys.readouterr()
    return printed.out + printed.err + caplog.text


def csv_task(folder: Path, corpus: Path, extra_row: str = "") -> Path:
    """A CSV sentence task from the corpus (the label: does the line mention a teacher?), with ``extra_row``."""
    lines = corpus.read_text().splitlines()[:40]
    rows = ["sentence,label", *(f"{line},{int('teacher' in line)}" for line in lines), *filter(None, [extra_row])]
    path = folder / "train.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


Provocation = Callable[[Path, dict], list[str]]


def _in_use(tmp: Path, fx: dict) -> list[str]:
    fx["lock"] = run_folder.OutputDirLock(tmp / "locked")  # held by this process: another run of the same folder
    return ["pretrain", *mlm_args(fx["corpus"], fx["tokenizer"], tmp / "locked", "macaron_bert",
                                  "--max_train_steps", "2")]  # fmt: skip


def _another_run(tmp: Path, fx: dict) -> list[str]:
    return ["pretrain", *mlm_args(fx["corpus"], fx["tokenizer"], fx["pretrained"], "macaron_bert",
                                  "--max_train_steps", "2", "--seed", "7")]  # fmt: skip


def _foreign(tmp: Path, fx: dict) -> list[str]:
    (tmp / "mine").mkdir()
    (tmp / "mine" / "notes.txt").write_text("the user's")
    return ["pretrain", *mlm_args(fx["corpus"], fx["tokenizer"], tmp / "mine", "macaron_bert",
                                  "--max_train_steps", "2")]  # fmt: skip


def _finished(tmp: Path, fx: dict) -> list[str]:
    return ["pretrain", *mlm_args(fx["corpus"], fx["tokenizer"], fx["pretrained"], "macaron_bert",
                                  "--max_train_steps", "2")]  # fmt: skip


def _finetune(fx: dict, train: Path, output: Path, *extra: str) -> list[str]:
    return ["finetune", "--model_name_or_path", str(fx["pretrained"]), "--train_file", str(train), "--do_train",
            "--max_steps", "1", "--max_seq_length", "24", "--output_dir", str(output), "--report_to", "none",
            "--disable_tqdm", "true", *extra]  # fmt: skip


def _bad_cell(tmp: Path, fx: dict) -> list[str]:
    return _finetune(fx, csv_task(tmp, fx["corpus"], "a sentence,1,an extra field"), tmp / "out")


def _positions(tmp: Path, fx: dict) -> list[str]:
    return [*_finetune(fx, csv_task(tmp, fx["corpus"]), tmp / "out"), "--max_seq_length", "100000"]


def _tokenizer(tmp: Path, fx: dict) -> list[str]:
    other = train_wordpiece_tokenizer(fx["corpus"].read_text().splitlines(), 50, min_frequency=1)
    other.save_pretrained(tmp / "other-tokenizer")
    return _finetune(fx, csv_task(tmp, fx["corpus"]), tmp / "out", "--tokenizer_name", str(tmp / "other-tokenizer"))


def _function_change(tmp: Path, fx: dict) -> list[str]:
    return _finetune(fx, csv_task(tmp, fx["corpus"]), tmp / "out", "--config_overrides", "hidden_act=relu")


def _no_field(tmp: Path, fx: dict) -> list[str]:
    return ["pretrain", *mlm_args(fx["corpus"], fx["tokenizer"], tmp / "out", "macaron_bert"), "--config_overrides",
            "x=1"]  # fmt: skip


def _unlisted(tmp: Path, fx: dict) -> list[str]:
    cli_main(["export", str(fx["pretrained"]), "--output_dir", str(tmp / "hub")])
    (tmp / "hub" / "notes.txt").write_text("not the export's")
    return ["push", str(tmp / "hub"), "--repo_id", "me/model", "--local_hub", str(tmp / "local-hub")]


def _previous_export(tmp: Path, fx: dict) -> list[str]:
    cli_main(["export", str(fx["pretrained"]), "--output_dir", str(tmp / "hub")])
    return ["export", str(fx["pretrained"]), "--output_dir", str(tmp / "hub")]


def _sharded(tmp: Path, fx: dict) -> list[str]:
    return [*_finetune(fx, csv_task(tmp, fx["corpus"]), tmp / "out"), "--fsdp", "full_shard"]


def _no_data_dir(tmp: Path, fx: dict) -> list[str]:
    fx["monkeypatch"].delenv("HF_VARIANTS_DATA", raising=False)
    return ["study", "classification_from_scratch"]


def _another_grid(tmp: Path, fx: dict) -> list[str]:
    learnable_ag_news(tmp / "data", rows=120)
    task = tmp / "records" / "ag_news"
    (task / "mgk_bert" / "control").mkdir(parents=True)
    (task / run_folder.FINGERPRINT_FILE).write_text(json.dumps({"seeds": [9]}))  # a grid of other settings
    (task / "mgk_bert" / "control" / "seed9.json").write_text("{}")  # that recorded a run
    return ["study", "classification_from_scratch", "--tasks", "ag_news", "--pairs", "mgk_bert", "--roles", "control",
            "--seeds", "1", "--data_dir", str(tmp / "data"), "--output_dir", str(tmp / "records")]  # fmt: skip


#: Each quote of the page → the mistake that makes a command print it.
PROVOKED: dict[str, Provocation] = {
    "... is in use by another run (PID N)": _in_use,
    "--output_dir X holds another run (N difference(s): ...)": _another_run,
    "--output_dir X is not empty and no hf-variants run wrote it": _foreign,
    "... holds this run, finished: nothing was trained or written": _finished,
    "FILE:N: ...": _bad_cell,
    "--max_seq_length N exceeds the model's position table": _positions,
    "The tokenizer X has another vocabulary than the one the model was pretrained with (...)": _tokenizer,
    "--config_overrides/--config_name change what X's weights compute (...)": _function_change,
    "... has no field 'x'": _no_field,
    "X holds N file(s) or link(s) its hf_variants_manifest.json does not list": _unlisted,
    "--output_dir X holds a previous export": _previous_export,
    "... does not support FSDP": _sharded,
    "argument --data_dir: required when $HF_VARIANTS_DATA is not set": _no_data_dir,
    "--output_dir X holds another grid (N difference(s): ...)": _another_grid,
}


def test_every_quote_of_the_page_has_its_provocation() -> None:
    assert sorted(page_quotes()) == sorted(PROVOKED)


@pytest.mark.parametrize("quote", sorted(PROVOKED))
def test_the_quoted_message_is_what_the_command_prints(
    quote: str, pretrained_run: Path, corpus: Path, tokenizer_dir: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    fixtures = {"pretrained": pretrained_run, "corpus": corpus, "tokenizer": tokenizer_dir, "monkeypatch": monkeypatch}
    argv = PROVOKED[quote](tmp_path, fixtures)
    capsys.readouterr()  # what setting up the mistake printed is not the answer
    try:
        text = said(argv, capsys, caplog)
    finally:
        if "lock" in fixtures:
            fixtures["lock"].release()
    assert pattern(quote).search(" ".join(text.split())), f"{quote!r} not in:\n{text[-2000:]}"
