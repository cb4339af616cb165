#!/usr/bin/env bash
# The GPU check of hf-variants, prepared to spend a borrowed GPU's minutes on measurements, not setup.
#
#   bash benchmarks/device_check.sh                          # on a GPU machine: planned at under 10 min; benchmarks/records/gpu/
#   bash benchmarks/device_check.sh --quick                  # fewer repeats and shorter pretraining, for a short GPU loan
#   bash benchmarks/device_check.sh --device cpu --tiny --output_dir DIR   # the dry run CI makes (seconds)
#
# It runs the package from this source tree (PYTHONPATH), with the machine's own torch, transformers,
# accelerate, torchdiffeq, tokenizers and safetensors; it needs no network. `hf-variants pretrain` also needs
# `datasets` (with dill and multiprocess): where the machine lacks it, wheels carried in .whl/ are installed
# (`bash benchmarks/device_check.sh --download_wheels` fetches them here, a few MB), else that step is skipped
# and says so. Steps:
#   1. versions.json: card, driver, CUDA, torch and the libraries found;
#   2. benchmarks/benchmark.py at BERT-base size (hidden 768, 12 layers, heads of 64), N = 128 and 512, batch 8, every
#      variant beside its matched control and transformers' BertForMaskedLM, bf16 autocast, plus the long-N rows
#      of MLK and BERT (4096, 8192): model_benchmark.{json,md,png}; --quick: 3 repeats (long rows 2), N-ODE at
#      tolerance 1e-3 only, the long rows at 4096 only;
#   3. the same models and the BERT control at the batch that fills the card (benchmarks/benchmark_saturation.py:
#      doubled from 8 until tokens/s gains under 5%), bf16, N = 128 and 512 (N-ODE: 128): saturation.{json,md};
#   4. `hf-variants pretrain` in bf16 (accelerate's --mixed_precision) on the BERT control at BERT-base size, at
#      its saturating batch of step 3, on generated sentences: one minute eager (pretrain_bf16.json), one with
#      --torch_compile (pretrain_bf16_compiled.json; its tokens/s include the compilation); --quick: 45 s each.
set -euo pipefail
cd "$(dirname "$0")/.."

device=cuda tiny=0 quick=0 output_dir=docs/benchmarks/gpu
while [ $# -gt 0 ]; do
    case "$1" in
        --device) device=$2; shift 2 ;;
        --tiny) tiny=1; shift ;;
        --quick) quick=1; shift ;;
        --output_dir) output_dir=$2; shift 2 ;;
        --download_wheels)
            # for the GPU machine's Python (3.12, manylinux x86_64), run on a machine with the package index
            python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
                --platform manylinux_2_17_x86_64 --platform any -d .whl "datasets>=5.0.1,<6" dill multiprocess
            exit 0 ;;
        *) echo "device_check.sh: unknown argument $1 (see the header of this file)" >&2; exit 2 ;;
    esac
done
mkdir -p "$output_dir"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python=${PYTHON:-python3}
started=$(date +%s)

echo "=== 1. versions ==="
"$python" - "$output_dir/versions.json" <<'EOF'
import importlib.metadata as metadata
import json
import subprocess
import sys

import torch

found = {}
for name in ("torch", "transformers", "accelerate", "torchdiffeq", "tokenizers", "safetensors", "datasets", "numpy"):
    try:
        found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        found[name] = None
record = {"python": sys.version.split()[0], "packages": found, "cuda": torch.version.cuda,
          "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"}
try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    record["nvidia_smi"] = smi.stdout.strip() or None
except OSError:
    record["nvidia_smi"] = None
print(json.dumps(record, indent=1))
with open(sys.argv[1], "w") as handle:
    json.dump(record, handle, indent=1)
EOF

echo "=== 2. model benchmark at batch 8, bf16 ==="
if [ "$tiny" = 1 ]; then
    sizes=(--tiny)
    sweep=(--tiny --models bert macaron_bert mgk_bert bert_control)
    compile_backend=(--torch_compile_backend eager)  # the dry run checks the path, not inductor's code generation
else
    sizes=(--hidden_sizes 768 --layers 12 --lengths 128 512 --mlk_lengths 4096 8192 --mlk_hidden_sizes 768
           --batch_size 8 --vocab_size 30522 --repeats 5 --long_repeats 3 --overhead_max_length 512
           --max_length_by_model node_transformer=512 --tolerances 1e-2 1e-3 1e-4)
    sweep=(--hidden_sizes 768 --layers 12 --lengths 128 512 --vocab_size 30522 --batch_size 8 --repeats 3
           --max_batch_size 1024 --max_length_by_model node_transformer=128
           --models bert macaron_bert mgk_bert mlk_bert transject node_transformer bert_control)
    compile_backend=()
    if [ "$quick" = 1 ]; then
        sizes+=(--mlk_lengths 4096 --repeats 3 --long_repeats 2 --tolerances 1e-3)  # the later flag wins
        sweep+=(--repeats 2)
    fi
fi
"$python" benchmarks/benchmark.py --device "$device" --precisions bf16 "${sizes[@]}" --output_dir "$output_dir"

echo "=== 3. the batch that fills the device: every model and its control, bf16 ==="
"$python" benchmarks/benchmark.py --device "$device" --precisions bf16 --saturating_batch "${sweep[@]}" \
    --output_dir "$output_dir"
length=128
if [ "$tiny" = 1 ]; then length=16; fi
batch=$("$python" benchmarks/benchmark_saturation.py "$output_dir/saturation.json" bert_control "$length" bf16)
echo "the BERT control's saturating batch: $batch"

echo "=== 4. pretraining at that batch in bf16, eager and compiled ==="
if ! "$python" -c "import datasets" 2>/dev/null && compgen -G ".whl/*.whl" >/dev/null; then
    "$python" -m pip install --quiet --no-index --no-deps .whl/*.whl
fi
if "$python" -c "import datasets" 2>/dev/null; then
    work=$(mktemp -d)
    "$python" -c "
from hf_variants.synthetic import synthetic_sentences
open('$work/train.txt', 'w').write('\n'.join(synthetic_sentences(${HF_VARIANTS_SENTENCES:-20000}, seed=0)) + '\n')"
    if [ "$tiny" = 1 ]; then
        model=(--config_overrides hidden_size=32,num_hidden_layers=2,num_attention_heads=2,intermediate_size=64
               --train_tokenizer_vocab_size 100 --time_budget_seconds 5)
    else
        model=(--config_overrides hidden_size=768,num_hidden_layers=12,num_attention_heads=12,intermediate_size=3072
               --train_tokenizer_vocab_size 8000 --time_budget_seconds $(( quick ? 45 : 60 )))
    fi
    for name in pretrain_bf16 pretrain_bf16_compiled; do
        extra=()
        if [ "$name" = pretrain_bf16_compiled ]; then extra=(--torch_compile "${compile_backend[@]}"); fi
        "$python" -m hf_variants.cli pretrain --model_type bert_control "${model[@]}" "${extra[@]}" \
            --per_device_train_batch_size "$batch" --train_file "$work/train.txt" --max_seq_length 128 \
            --max_train_steps 1000000 --mixed_precision bf16 --report_to none --disable_tqdm --logging_steps 50 \
            --output_dir "$work/$name" | tail -n 5
        cp "$work/$name/results.json" "$output_dir/$name.json"
    done
    rm -rf "$work"
else
    echo "skipped: this machine has no 'datasets' and .whl/ holds no wheels (benchmarks/device_check.sh --download_wheels)"
fi
echo "device check done in $(( $(date +%s) - started )) s: $output_dir"
