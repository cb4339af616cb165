"""A model of an experiment, written ``model_type[:key=value,...]`` — parsed, printed, named on disk and
built (with its matched control) in this one place, for ``hf-variants compare``, the classification grid
and the GLUE studies.

    ModelSpec.parse("macaron_bert:layer_norm_position=post")   # checked against the registry
    spec.config(sizes, num_labels=4)                              # the variant at the common sizes
    spec.control().config(sizes, num_labels=4)                    # its matched control, same sizes
    spec.fields(sizes)                                            # the config fields for --config_overrides
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.overrides import check_model_spec, format_overrides, parse_overrides
from ..storage.files import path_component

#: transformers' own BertForMaskedLM: an external reference, not a model of this package.
EXTERNAL_REFERENCE = "bert"
#: How a matched control is named (``control of mgk_bert``).
CONTROL_PREFIX = "control of "
#: A replica initialises with every seed shifted by this and is named with this suffix (``bert_control (other
#: seeds)``): the same model under other initialisation seeds, the negative control of a comparison.
REPLICA_SEED_OFFSET, REPLICA_SUFFIX = 1000, " (other seeds)"
#: What the negative control shares with its pair, as its records state it (older records, without it, drew
#: their data order and masks from the shifted seeds too).
SHARED_DATA_RULE = (
    "the BERT control initialised from other seeds, on the data order, masks and held-out slices of the seed it is "
    "paired with: what a variant and its control share at one seed"
)
#: The positive control's token mixer: tokens not mixed by content or position (a bag of words).
NO_MIXING = {"attention_type": "mean"}


def spec_folder(name: str) -> str:
    """A file-system name for a spec's name (``macaron_bert:layer_norm_position=post`` →
    ``macaron_bert__layer_norm_position-post``): one path component, checked (:func:`path_component`), so that no
    spec names a folder outside the one it is written into."""
    folder = name.replace(" ", "_").replace(":", "__").replace(",", "_").replace("=", "-")
    return path_component(folder.translate(str.maketrans("", "", "[]()")), f"the model {name!r}")


@dataclass(frozen=True)
class ModelSpec:
    """``model_type`` or ``model_type:key=value,...`` (config fields, e.g. ``macaron_bert:attention_type=mgk``
    or ``node_transformer:attention_type=mlk,rtol=1e-4``); a matched control names the spec whose idea it
    turns off (``control_of``) and takes that spec's sizes."""

    model_type: str
    overrides: str = ""
    control_of: ModelSpec | None = None
    seed_offset: int = 0  # added to the seed the model initialises with (a replica's: REPLICA_SEED_OFFSET)

    @classmethod
    def from_text(cls, text: str) -> ModelSpec:
        """Split ``model_type:overrides`` without checking it (see :meth:`parse`)."""
        model_type, _, overrides = text.partition(":")
        return cls(model_type, overrides)

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """A checked spec: an unknown model type, field or value is a ``ValueError`` naming it. Also
        reads back a control's name (``control of <spec>``)."""
        if text.endswith(REPLICA_SUFFIX):
            return cls.parse(text.removesuffix(REPLICA_SUFFIX)).replica()
        if text.startswith(CONTROL_PREFIX):
            control = cls.parse(text.removeprefix(CONTROL_PREFIX)).matched_control()
            if control is None:
                raise ValueError(f"{text!r}: that model has no idea to turn off, so no matched control")
            return control
        spec = cls.from_text(text)
        if spec.model_type == EXTERNAL_REFERENCE:
            if spec.overrides:
                raise ValueError(f"{text!r}: transformers' BERT takes no overrides here; use bert_control")
            return spec
        check_model_spec(text)  # the one check of a spec: registered type, declared fields, values the config takes
        return spec

    @property
    def name(self) -> str:
        """The spec as written: the model's label in tables and result files."""
        if self.control_of is not None:
            name = f"{CONTROL_PREFIX}{self.control_of.name}"
        else:
            name = f"{self.model_type}:{self.overrides}" if self.overrides else self.model_type
        return name + (REPLICA_SUFFIX if self.seed_offset else "")

    @property
    def folder(self) -> str:
        """A file-system name for the spec's run folders."""
        return spec_folder(self.name)

    def config(self, sizes: Mapping[str, Any] | None = None, **fields: Any):
        """The config at ``sizes`` (the spec's own overrides win over them) with ``fields`` (e.g. the
        task's ``num_labels``); a control's is its variant's :func:`matched_control`."""
        from transformers import AutoConfig

        from ..core.composition import matched_control

        if self.control_of is not None:
            return matched_control(self.control_of.config(sizes, **fields))
        return AutoConfig.for_model(self.model_type, **{**(sizes or {}), **parse_overrides(self.overrides), **fields})

    def fields(self, sizes: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The config fields that, given to ``model_type``, build :meth:`config` at ``sizes`` (what a
        ``--config_overrides`` of pretraining or fine-tuning carries)."""
        from ..core.composition import matched_control_overrides

        if self.control_of is not None:
            variant = self.control_of
            return {**variant.fields(sizes), **matched_control_overrides(variant.config(sizes))}
        return {**(sizes or {}), **parse_overrides(self.overrides)}

    def pair(self) -> tuple[str, str]:
        """``(attention_type, layer_scheme)`` of the spec (``transformers`` BERT: softmax × Lie–Trotter)."""
        if self.model_type == EXTERNAL_REFERENCE:
            return "softmax", "lie_trotter"
        config = self.config()
        return config.attention_type, config.layer_scheme

    def replica(self) -> ModelSpec:
        """The same model initialised from other seeds (:data:`REPLICA_SEED_OFFSET`), on the same data: any
        difference from this one is noise, so a verdict between the two must hold 0 (a comparison's negative
        control)."""
        return replace(self, seed_offset=REPLICA_SEED_OFFSET)

    def data_seed(self, seed: int) -> int:
        """The seed of the data order, masks and held-out slice of this model's run at ``seed`` (its
        initialisation seed): the replicate's own seed, shared by every model of the replicate, so that a
        replica differs from its model in initialisation only, as a variant differs from its control in
        its idea only (:data:`SHARED_DATA_RULE`)."""
        return seed - self.seed_offset

    def without_token_mixing(self) -> ModelSpec:
        """This model with tokens mixed only by their unweighted mean (:data:`NO_MIXING`): on a task that
        needs tokens related, a verdict against this model must come out below 0 (a positive control)."""
        return ModelSpec(self.model_type, format_overrides({**parse_overrides(self.overrides), **NO_MIXING}))

    def control(self) -> ModelSpec:
        """This spec's matched control (the same model when it has no idea of its own)."""
        return ModelSpec(self.model_type, self.overrides, control_of=self)

    def matched_control(self) -> ModelSpec | None:
        """The matched control, or ``None`` when the model has no idea of its own (the BERT control,
        ``transformers`` BERT, or a control)."""
        from ..core.composition import matched_control_overrides

        if self.model_type == EXTERNAL_REFERENCE or self.control_of is not None:
            return None
        config = self.config()
        changes = {k: v for k, v in matched_control_overrides(config).items() if getattr(config, k, None) != v}
        return self.control() if changes else None


def with_matched_controls(specs: Sequence[ModelSpec]) -> list[ModelSpec]:
    """``specs`` with each variant's matched control right after it."""
    expanded: list[ModelSpec] = []
    for spec in specs:
        expanded.append(spec)
        control = spec.matched_control()
        if control is not None:
            expanded.append(control)
    return expanded


#: The baseline of the calibration controls (:func:`with_calibration_controls`).
BASELINE = "bert_control"
#: Embedded tasks that a model without token mixing cannot solve: the positive control is judged on them.
NEEDS_TOKEN_MIXING = frozenset({"attractor_number", "agreement", "recall"})


def with_calibration_controls(
    specs: Sequence[ModelSpec], tasks: Sequence[str], off: bool = False
) -> tuple[list[ModelSpec], dict[str, Any]]:
    """``specs`` with the two models that show what this comparison can see, and which they are: the
    BERT control initialised from other seeds (:meth:`~.spec.ModelSpec.replica`, the *negative* control: its verdict
    against the BERT control must hold 0) and, when a task needs token mixing (:data:`NEEDS_TOKEN_MIXING`),
    the BERT control without token mixing (:meth:`~.spec.ModelSpec.without_token_mixing`, the *positive*
    control: its verdict must lie below 0). The BERT control is added first when ``specs`` lacks it."""
    if off:
        return list(specs), {}
    baseline = ModelSpec(BASELINE)
    positive_tasks = [task for task in tasks if task in NEEDS_TOKEN_MIXING]
    calibration: dict[str, Any] = {"baseline": baseline.name, "negative": baseline.replica().name,
                                   "negative_shares": SHARED_DATA_RULE}
    added = [baseline.replica()]
    if positive_tasks:
        calibration |= {"positive": baseline.without_token_mixing().name, "positive_tasks": positive_tasks}
        added.insert(0, baseline.without_token_mixing())
    return [*([] if baseline in specs else [baseline]), *specs, *added], calibration


def calibration_pairs() -> dict[str, str]:
    """The two pairs a study's grid runs beside its own, as a variant against its control under the same protocol
    (:mod:`.grid`): ``positive``, the BERT control without token mixing against the BERT control (its matched
    control: softmax attention), which must come out below; ``negative`` (the A/A), the BERT control initialised from
    other seeds against the BERT control, which must be equivalent within the margin."""
    baseline = ModelSpec(BASELINE)
    return {"positive": baseline.without_token_mixing().name, "negative": baseline.replica().name}
