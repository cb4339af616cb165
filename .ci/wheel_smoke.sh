#!/usr/bin/env bash
# The package as a user gets it: build the wheel and the sdist, install the wheel (not editable) into a
# fresh virtual environment outside the checkout, and run the documented commands there — pretrain,
# finetune, export, push to a local Hub folder — then remove hf-variants and load the export with
# trust_remote_code, with no standard input (a prompt would fail). Usage: bash .ci/wheel_smoke.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

python3 -m venv "$work/build-env"
"$work/build-env/bin/python" -m pip install --quiet --upgrade pip build
"$work/build-env/bin/python" -m build --sdist --wheel --outdir "$work/dist" "$repo" > "$work/build.log" 2>&1 \
    || { cat "$work/build.log"; exit 1; }
wheel="$(ls "$work"/dist/hf_variants-*.whl)"
sdist="$(ls "$work"/dist/hf_variants-*.tar.gz)"
echo "built $(basename "$wheel") and $(basename "$sdist")"
for archive_check in "unzip -l $wheel" "tar tzf $sdist"; do
    listing="$($archive_check)"
    for needed in hf_variants/model_cards/_common.md hf_variants/model_cards/node_transformer.md \
                  hf_variants/glue/evaluate_glue/evaluate_glue.py hf_variants/cli/__main__.py; do
        grep -q "$needed" <<<"$listing" || { echo "missing from ${archive_check%% *}: $needed"; exit 1; }
    done
done
# The wheel is the library: only the package and its metadata, no record, no study driver, no docs renderer (they
# live beside it in the repository: experiments/, benchmarks/, tools/, examples/).
outside="$(python3 -c 'import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
print("\n".join(n for n in names if not (n.startswith("hf_variants/") or ".dist-info/" in n)
                or n.endswith((".json", ".jsonl")) or n.rsplit("/", 1)[-1] in {"render_tables.py", "findings.py",
                "which_variant.py", "never_from_scratch.py", "study_tables.py", "benchmark_tables.py",
                "glue_after_pretraining.py", "glue_study.py"}))' "$wheel")"
[ -z "$outside" ] || { echo "the wheel holds files outside the library:"; echo "$outside"; exit 1; }

python3 -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
python -m pip install --quiet --upgrade pip
python -m pip install --quiet torch==2.13.0
echo "torch==2.13.0" > "$work/torch-constraint.txt"
python -m pip install --quiet "$wheel" -c "$work/torch-constraint.txt"
cd "$work"  # outside the checkout: nothing can come from it
python -c "import hf_variants, sys; assert '$repo' not in hf_variants.__file__, hf_variants.__file__"

hf-variants --version
python - <<'PY'
from hf_variants.synthetic import synthetic_sentences

open("corpus.txt", "w").write("\n".join(synthetic_sentences(400, seed=1)) + "\n")
with open("train.csv", "w") as train, open("dev.csv", "w") as dev:
    for handle, count in ((train, 64), (dev, 16)):
        handle.write("sentence,label\n")
        for i in range(count):
            handle.write(f"{'a fine and moving film' if i % 2 else 'a dull and lifeless script'},{i % 2}\n")
PY
hf-variants pretrain --model_type node_transformer \
    --config_overrides hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=32 \
    --train_file corpus.txt --train_tokenizer_vocab_size 120 --max_seq_length 24 --max_train_steps 3 \
    --disable_tqdm --output_dir mlm < /dev/null
hf-variants finetune --model_name_or_path mlm --train_file train.csv --validation_file dev.csv \
    --do_train --do_eval --max_steps 3 --per_device_train_batch_size 8 --max_seq_length 24 \
    --report_to none --disable_tqdm true --output_dir classifier < /dev/null
hf-variants export classifier --output_dir export --repo_id me/tiny --push --local_hub hub < /dev/null
for shipped in modeling_node_transformer.py configuration_ode.py modeling_ode.py; do
    test -f "hub/me/tiny/$shipped" || { echo "the export lacks $shipped"; exit 1; }
done
for other in configuration_mgk.py modeling_mgk.py; do  # only the code of the export's own pair
    test ! -e "hub/me/tiny/$other" || { echo "the export ships $other, of another pair"; exit 1; }
done

python -m pip uninstall --quiet --yes hf-variants
if python -c "import hf_variants" 2>/dev/null; then echo "hf_variants is still importable"; exit 1; fi
python - <<'PY' < /dev/null
import transformers

folder = "hub/me/tiny"
model = transformers.AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)
assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
classify = transformers.pipeline("text-classification", model=folder, trust_remote_code=True)
print("remote-code load without hf-variants:", classify(["a fine and moving film"]))

# the card's own usage snippet, as a user would paste it (the repository id replaced by the folder)
import re
card = open(f"{folder}/README.md").read()
(snippet,) = re.findall(r"```python\n(.*?)```", card, flags=re.DOTALL)
exec(snippet.replace('"me/tiny"', repr(folder)))
PY
echo "wheel smoke test passed"
