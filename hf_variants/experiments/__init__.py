"""Controlled experiments: each variant against its matched control (the same model with only its idea
turned off, :func:`hf_variants.core.composition.matched_control`), learning rates chosen on a held-out
slice of the training data, several seeds, intervals and paired differences.

* :mod:`.text_classification` — the from-scratch sequence-classification tasks (IMDb, AG News, ListOps)
  read from local files, with fixed-seed splits where only one file exists;
* :mod:`.training` — one training run (model, data, learning rate, seed) → one result record;
* :mod:`.grid` — the resumable grid of runs: sweep on the held-out slice, then the seeds;
* :mod:`.statistics` — means, 95% intervals, paired differences, "did not learn".
"""
