"""The lab: controlled experiments on the library. Each variant against its matched control (the same
model with only its idea turned off, :func:`hf_variants.core.composition.matched_control`), learning
rates chosen on a held-out slice of the training data, several seeds, intervals and paired differences.

The library (models, configs, registries, Hub export, the two training engines) never imports the lab;
the lab needs the ``lab`` extra for its figures (``pip install 'hf-variants[lab]'``).

* :mod:`.compare` — ``hf-variants compare``, the main job: tokenizer, MLM pretraining, held-out rate
  choice, fine-tuning, reload, analysis and figures for each variant and its control; its data
  (:mod:`.data_sources`), stages on the engines and their finished-stage records (:mod:`.stages`),
  measurements after reloading (:mod:`.measurement`) and report (:mod:`.report`);
* :mod:`.execution` — the one executor every study submits its runs to (side by side or inline);
* :mod:`.analysis`, :mod:`.figures` — the report's measurements on trained models and its PNG figures;
* :mod:`.text_classification` — the grid's reading of the task table's classification tasks (IMDb, AG News,
  ListOps, SST-2) from local files, with fixed-seed splits where only one file exists;
* :mod:`.grid_training` — one from-scratch classification run (model, data, learning rate, seed) → one
  result record;
* :mod:`.grid` — the resumable grid of runs: sweep on the held-out slice, then the seeds;
* :mod:`.tables` — the grid's tables;
* :mod:`.statistics` — means, 95% intervals, paired differences, "did not learn";
* :mod:`.verdicts` — the protocol's rules: the learning-rate choice, what one run shows, the verdict of a pair;
* :mod:`.outcomes` — every study's records read into those rules, one reader over declared field maps.
"""

LAB_EXTRA = "pip install 'hf-variants[lab]'"


def require_lab_extra() -> None:
    """Raise ``ImportError`` naming the extra to install when the lab's own dependencies are missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(f"The lab draws its figures with matplotlib, which its extra installs: {LAB_EXTRA}") from None
