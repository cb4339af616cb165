"""The tables of docs/benchmarks.md and docs/fine-tuning.md rendered from the benchmarks' records
(``benchmarks/records/*.json``, written by the scripts under ``benchmarks/``); ``tools/render_tables.py`` fills the
pages' blocks with them."""

from __future__ import annotations


def padding_table(record: dict) -> str:
    """The committed record (``padding_benchmark.json``) as the table of docs/fine-tuning.md and docs/benchmarks.md."""
    rows, settings = record["summary"], record["settings"]
    lines = ["| setting | positions computed | × fewer than padded | training time | × faster than padded | "
             "dev accuracy | against padded (dev accuracy, points) |",
             "|---|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for setting, row in rows.items():
        lines.append(f"| {setting} | {row['positions']:,.0f} | {row['fewer_positions_than_padded']:.1f} | "
                     f"{row['train_seconds']:.2f} s | {row['speedup_over_padded']:.1f} | "
                     f"{100 * row['dev_accuracy']:.1f} | {row['dev_accuracy_vs_padded'] or '—'} |")  # fmt: skip
    return "\n".join(lines) + (
        "\n\nSST-2, a randomly initialised BERT control (hidden 128, 2 layers), "
        f"{settings['steps']} steps of 32 on the first {settings['train_examples']:,} training sentences, "
        f"max_seq_length {settings['max_seq_length']}, seeds "
        f"{', '.join(map(str, settings['seeds']))}; medians over seeds (ratios per seed, then the median). Made by "
        "`python benchmarks/finetune_padding_benchmark.py --data_dir $DATA --output_dir OUT`.\n"
    )  # fmt: skip


def pretrain_compile_table(record: dict) -> str:
    """The compiled-pretraining record (``pretrain_compile.json``) as the table of docs/benchmarks.md."""
    settings = record["settings"]
    lines = [
        f"`python {record['command']}` — the BERT control, hidden {settings['hidden_size']}, {settings['layers']} "
        f"layers, batch {settings['batch_size']} × {settings['length']} tokens, {settings['steps']} steps, "
        f"{record['threads']} threads; runs alternated, each in a fresh process. Whole run: the engine's own "
        "tokens/s, compilation included; second half: over the second half of the steps, after compilation.",
        "",
        "| mode | runs | tokens/s, whole run | tokens/s, second half | final loss |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode, summary in record["summary"].items():
        throughput = f"{summary['tokens_per_second']:,.0f} | {summary['second_half_tokens_per_second']:,.0f}"
        lines.append(f"| {mode} | {summary['runs']} | {throughput} | {summary['final_train_loss']:.4f} |")
    ratio = record["compiled_vs_eager"]
    lines += ["", f"Compiled / eager: {ratio['whole_run']:.2f}× over whole runs (compilation included), "
              f"{ratio['second_half']:.2f}× after compilation (medians of runs)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def transject_weights_table(record: dict) -> str:
    """The TransJect-weights record (``transject_weights.json``) as the table of docs/benchmarks.md."""
    lines = [f"`python {record['command']}` — {record['threads']} threads, torch {record['torch']}.", "",
             "Forward + backward of `base @ map(skew(X))` for a stack of matrices, medians of repeats: in one batched "
             "call, and in one call per matrix (how torch's parametrisation runs them, layer by layer). Offset scale: "
             "the standard deviation of the random offsets X (0: a model at initialisation).", "",
             "| hidden | matrices | offset scale | map | one batched call ms | one call per matrix ms | "
             "max \\|QᵀQ − I\\| |", "|---:|---:|---:|---|---:|---:|---:|"]  # fmt: skip
    for r in record["maps"]:
        lines.append(f"| {r['hidden']} | {r['matrices']} | {r['offset_scale']:g} | {r['map']} | "
                     f"{1000 * r['batched_seconds']:,.0f} | {1000 * r['one_by_one_seconds']:,.0f} | "
                     f"{r['orthogonality_error']:.1e} |")  # fmt: skip
    fastest = {}
    for r in record["maps"]:
        key = (r["hidden"], r["offset_scale"])
        if key not in fastest or r["batched_seconds"] < fastest[key]["batched_seconds"]:
            fastest[key] = r
    names = {r["map"] for r in fastest.values()}
    winners = sorted(f"{name} (the default)" if name == "cayley" else name for name in names)
    lines += ["", f"Fastest exact map: {' or '.join(winners)}"
              + (" at every size and offset measured." if len(winners) == 1 else ", depending on size and offset.")]
    steps = record["steps"]
    lines += ["", f"Training step, hidden {steps['hidden']}, N = {steps['length']}, batch {steps['batch']}, "
              f"{steps['layers']} layers; interleaved rounds, medians. *Each matrix in its layer*: torch's "
              "parametrisation, as before the batching; *plain twin*: the same matrices held as plain weights, with "
              "no parametrisation at all.", "",
              "| model | step ms | × control |", "|---|---:|---:|"]  # fmt: skip
    for case, seconds in steps["seconds"].items():
        ratio = steps["vs_control"].get(case)
        lines.append(f"| {case} | {1000 * seconds:,.0f} | {'—' if ratio is None else f'{ratio:.2f}'} |")
    share, ratios = steps["parametrisation_share"], steps["vs_control"]
    reached, bound = ratios["transject"], ratios["plain twin"]
    verdict = "met" if reached >= 0.8 else f"missed by {0.8 - reached:.2f}"
    lines += ["", f"TransJect at {reached:.2f}× its control: the target of 0.8× is {verdict}. With no "
              f"parametrisation at all its twin runs at {bound:.2f}× the control, which bounds what any map could "
              "reach at this size: the rest of the gap is the cost of TransJect's own layers, not of its maps."]
    lines += ["", f"The parametrisation's share of a TransJect step: {100 * share['batched']:.0f}% batched, "
              f"{100 * share['each matrix in its layer']:.0f}% with each matrix computed in its layer. Four "
              f"micro-batches with the matrices held for the step: "
              f"{steps['held_for_the_step_vs_per_forward']:.2f}× the speed of computing them in every forward pass."]
    return "\n".join(lines) + "\n"


def attention_benchmark_table(record: dict) -> str:
    """The attention record (``attention_benchmark.json``, ``benchmarks/benchmark_attention.py``) as the table and
    summary of docs/benchmarks.md: every case built as a model builds it (the token mixer its config names)."""
    kinds = {"bert_sdpa": "BERT sdpa", "mgk_fused": "MGK fused", "mgk_reference": "MGK reference", "mlk": "MLK"}
    lines = ["| N | " + " | ".join(kinds.values()) + " |", "|---:|" + "---:|" * len(kinds)]
    for index, length in enumerate(record["seq_lens"]):
        cells = []
        for kind in kinds:
            seconds, memory = record["seconds"][kind][index], record["peak_memory_mib"][kind][index]
            cells.append("—" if seconds is None else f"{1000 * seconds:.1f} ms / {memory:.0f} MiB")
        lines.append(f"| {length} | " + " | ".join(cells) + " |")
    summary, longest = record["summary"], max(record["seq_lens"])
    sentences = []
    if "fused_speedup_over_reference_at_2048" in summary:
        sentences.append(f"At N = 2048 the fused MGK path is {summary['fused_speedup_over_reference_at_2048']:.1f}× "
                         "faster than the reference and needs "
                         f"{100 * summary['fused_memory_fraction_of_reference_at_2048']:.1f}% of its memory.")
    sentences.append(f"MLK is {summary[f'mlk_speedup_over_softmax_at_{longest}']:.1f}× faster than softmax "
                     f"attention at N = {longest}")
    if "mlk_time_exponent_512_to_max" in summary:
        sentences[-1] += (f"; its time grows as N^{summary['mlk_time_exponent_512_to_max']:.2f} between 512 and "
                          f"{longest} (softmax: N^{summary['softmax_time_exponent_512_to_max']:.2f})")
    mlm = record["mlm_step"]
    sentences[-1] += "."
    sentences.append(f"An MLM training step of MGK-BERT with {mlm['mgk_heads']} heads (N = {mlm['seq_len']}, batch "
                     f"{mlm['batch']}) runs at {summary['mgk_bert_over_bert_mlm_throughput']:.2f}× the throughput of "
                     "`BertForMaskedLM` (sdpa) with twice the heads.")
    return "\n".join(lines) + "\n\n" + " ".join(sentences) + "\n"


def packing_table(record: dict) -> str:
    """The packing record (``packing_benchmark.json``, ``benchmarks/benchmark_packing.py``) as the table of
    docs/benchmarks.md: positions computed (a count) and a training step's tokens per second (the mask's price)."""
    positions, step, model = record["positions"], record["training_step"], record["model"]
    length = record["max_seq_length"]
    lines = [
        "| keeping documents apart by | positions computed | real tokens among them | training step, tokens/s |",
        "|---|---:|---:|---:|",
        f"| one document per row, padded to {length} | {positions['padded_row_positions']:,} | "
        f"{100 * positions['real_token_share_padded']:.0f}% | — |",
        f"| `--packing documents` (block-diagonal mask) | {positions['packed_positions']:,} | 100% | "
        f"{step['documents_tokens_per_second']:,.0f} |",
        f"| (`--packing blocks`: documents attend to each other) | {positions['packed_positions']:,} | 100% | "
        f"{step['blocks_tokens_per_second']:,.0f} |",
    ]
    return "\n".join(lines) + (
        f"\n\n{record['corpus']} ({positions['documents']:,} non-empty lines, {positions['tokens']:,} tokens with a "
        f"WordPiece vocabulary of 8,000), blocks of {length}: one document per padded row computes "
        f"{positions['padded_over_packed']:.1f}× the positions of packed blocks. The step: a BERT control "
        f"(hidden {model['hidden_size']}, {model['num_hidden_layers']} layers, SDPA), batch {model['batch_size']}, "
        f"forward and backward, medians of interleaved repeats: with the mask a step runs at "
        f"{step['documents_over_blocks']:.2f}× the tokens per second of one without. Made by "
        "`python benchmarks/benchmark_packing.py --train_file $DATA/wikitext-2/train.txt --output_dir OUT`.\n"
    )


def streaming_table(record: dict) -> str:
    """The streaming record (``streaming_benchmark.json``, ``benchmarks/benchmark_streaming.py``) as the table of
    docs/benchmarks.md: a short run streamed and in memory as the corpus grows, and one epoch read by the stream."""
    growth, runs, reads = record["growth"], record["runs"], record["epoch_reads"]
    lines = ["| corpus | loaded | peak resident memory | `datasets` cache written | wall time of the run |",
             "|---|---|---:|---:|---:|"]  # fmt: skip
    for name, run in runs.items():
        size = name.split("-")[1]
        lines.append(f"| {size} ({run['corpus_bytes'] / 2**20:,.0f} MiB) | "
                     f"{'`--streaming`' if run['streaming'] else 'in memory'} | {run['peak_rss_mib']:,.0f} MiB | "
                     f"{run['datasets_cache_mib']:,.0f} MiB | {run['wall_seconds']:.0f} s |")  # fmt: skip
    epoch = reads[f"{growth}x"]
    samples = [mib for _, mib in epoch["resident_mib_every_10000_blocks"]]
    return "\n".join(lines) + (
        f"\n\n{record['corpus']} (1x) and the same text {growth} times ({growth}x); each run {record['steps']} steps "
        f"of a tiny Macaron-BERT ({record['model']}), blocks of 128, in a fresh process (one run each: the wall "
        "times are rough). The in-memory path tokenises the whole corpus into the `datasets` cache before its first "
        f"step; the stream reads only what the steps use. Reading one whole epoch of the {growth}x stream "
        f"({epoch['blocks']:,} blocks), the process's resident memory stayed between {min(samples):,.0f} and "
        f"{max(samples):,.0f} MiB (sampled every 10,000 blocks; the last sample {samples[-1]:,.0f} MiB, the peak "
        f"{epoch['peak_rss_mib']:,.0f} MiB), against a peak of {reads['1x']['peak_rss_mib']:,.0f} MiB for the 1x "
        "epoch. Made by "
        "`python benchmarks/benchmark_streaming.py --train_file $DATA/wikitext-2/train.txt --output_dir OUT`.\n"
    )


def streaming_budget_table(record: dict) -> str:
    """The budgeted kill-and-resume record (``streaming_budget.json``, ``benchmarks/benchmark_streaming_budget.py``)
    as the table of docs/benchmarks.md: per process count, the uninterrupted and the killed-then-resumed runs."""
    budget_gib, corpus_gib = record["budget_bytes"] / 2**30, record["corpus_bytes"] / 2**30
    lines = ["| processes | run | exit | peak resident memory (largest process) | resumed run's weights |",
             "|---:|---|---|---:|---|"]  # fmt: skip
    for processes, result in record["processes"].items():
        same = ("bit for bit the uninterrupted run's" if result["weights_equal"]
                else f"differ (largest {result['largest_weight_difference']:.2g})")  # fmt: skip
        same += (f"; the same loss at all {result['logged_losses']} logged steps" if result.get("losses_equal")
                 else "; other losses")  # fmt: skip
        for name, run in result["runs"].items():
            exit_text = ("killed (SIGKILL)" if run["killed"] else "finished" if run["exit_code"] == 0
                         else f"failed (code {run['exit_code']})")  # fmt: skip
            if name == "resumed":
                exit_text += ", resumed from its checkpoint" if run["resumed"] else ", did not resume"
            lines.append(f"| {processes} | {name} | {exit_text} | {run['peak_rss_mib']:,.0f} MiB | "
                         f"{same if name == 'resumed' else ''} |")  # fmt: skip
    smaller = record["smaller_budget"]
    binds = ("fails, out of memory" if smaller["exit_code"] != 0 and smaller["out_of_memory"]
             else "does not fail: the budget does not bind")  # fmt: skip
    return "\n".join(lines) + (
        f"\n\nEvery process (the launcher's too) limited to {budget_gib:.1f} GiB of address space by the kernel "
        f"(`RLIMIT_AS`); the corpus, {record['corpus']} repeated, is {corpus_gib:.1f} GiB: "
        f"{record['corpus_over_budget']:.1f} times that budget. {record['steps']} steps of a tiny Macaron-BERT "
        f"({record['model']}), global batch {record['global_batch']} (two processes: 4 each), blocks of "
        f"{record['block']}, a checkpoint every 10 steps, killed after step {record['kill_at']}. The same "
        f"one-process run under {smaller['budget_bytes'] / 2**30:.1f} GiB {binds}. Made by "
        "`python benchmarks/benchmark_streaming_budget.py --train_file $DATA/wikitext-2/train.txt --output_dir OUT`.\n"
    )


def gradient_checkpointing_table(record: dict) -> str:
    """The gradient-checkpointing record (``gradient_checkpointing_benchmark.json``,
    ``benchmarks/benchmark_gradient_checkpointing.py``) as the table of docs/benchmarks.md."""
    medians = record["medians"]
    lines = ["| `hf-variants pretrain` | peak resident memory | training tokens/s |", "|---|---:|---:|"]
    for name, label in (("plain", "without the flag"), ("checkpointed", "`--gradient_checkpointing`")):
        lines.append(f"| {label} | {medians[name]['peak_rss_mib']:,.0f} MiB | "
                     f"{medians[name]['tokens_per_second']:,.0f} |")  # fmt: skip
    return "\n".join(lines) + (
        f"\n\n{record['model_type']} ({record['config_overrides']}), blocks of {record['max_seq_length']}, batch "
        f"{record['batch_size']}, {record['steps']} steps on {record['corpus']}; each run in a fresh process, the two "
        f"interleaved over {record['repeats']} rounds, medians. With the flag the run's peak memory is "
        f"{record['memory_ratio']:.2f}× and its speed {record['speed_ratio']:.2f}× those without. Made by "
        "`python benchmarks/benchmark_gradient_checkpointing.py --train_file $DATA/wikitext-2/train.txt "
        "--output_dir OUT`.\n"
    )


def onnx_table(record: dict) -> str:
    """The ONNX record (``onnx_benchmark.json``, ``benchmarks/benchmark_onnx.py``) as the table of
    docs/benchmarks.md: onnxruntime against the eager forward, per variant."""
    names = {"bert_control": "BERT control", "macaron_bert": "Macaron-BERT", "mgk_bert": "MGK-BERT",
             "transject": "TransJect"}  # fmt: skip
    lines = ["| model | eager, s per batch | onnxruntime, s per batch | onnxruntime speed-up | "
             "largest logit difference |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    for model_type, row in record["models"].items():
        lines.append(f"| {names.get(model_type, model_type)} | {row['eager_seconds']:.3f} | "
                     f"{row['onnxruntime_seconds']:.3f} | {row['onnxruntime_speedup']:.2f}× | "
                     f"{row['max_logit_difference']:.1e} |")  # fmt: skip
    size = record["size"]
    return "\n".join(lines) + (
        f"\n\nSequence classifiers of hidden size {size['hidden_size']}, {size['num_hidden_layers']} layers, a batch "
        f"of {record['batch_size']} × {record['length']} tokens on the CPU; medians of {record['repeats']} rounds, the "
        "two runtimes alternating. The eager TransJect computes its orthogonal weights at every call; its export holds "
        "them as constants. The N-ODE Transformer does not export. Made by "
        "`python benchmarks/benchmark_onnx.py --output_dir OUT`.\n"
    )
