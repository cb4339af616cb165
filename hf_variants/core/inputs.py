"""Input checks and attention masks, shared by every variant.

Every encoder turns the user's ``attention_mask`` (1 = real token, 0 = padding) into one boolean
*key padding mask* of shape ``(batch, seq_len)`` (``True`` = real token), or ``None`` when nothing is
padded, and ``position_ids`` that restart inside a row into document ids (packed documents). The forward's
:class:`TokenLayout` holds both and builds once what each attention kind derives from them: an additive bias
for eager softmax, a boolean mask for ``scaled_dot_product_attention``, a ``BlockMask`` for flex attention,
a one-hot of the documents for the mixers that sum over tokens (linear attention, the mean).
"""

from __future__ import annotations

from typing import Any

import torch


def full_precision(device: torch.device | str) -> torch.autocast:
    """A float32 island inside mixed precision: ``torch.autocast`` (``accelerate launch --mixed_precision
    bf16``) off for the computations that lose their meaning in bf16 — orthogonal parametrisations (the
    weight must stay orthogonal), TransJect's spectrum (an eigen-decomposition of a Gram matrix) and MGK's
    soft E-step (mixture responsibilities); the ODE solver's state is float32 as well (its step-size control
    compares errors with rtol/atol far below bf16 resolution). Inputs are cast to float32 by the caller."""
    return torch.autocast(device_type=torch.device(device).type, enabled=False)


def value_checks_enabled() -> bool:
    # Data-dependent checks would break graph capture; compiled/traced code skips them.
    return not (torch.jit.is_tracing() or torch.compiler.is_compiling())


def check_input_ids(
    input_ids: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
    vocab_size: int,
    embedding_width: int | None = None,
) -> tuple[int, int]:
    """Check that exactly one input is given, that it is batched, that ids lie in the vocabulary and
    that ``inputs_embeds`` have the width of the word embeddings (``embedding_width``).

    Returns ``(batch_size, seq_len)``.
    """
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("Pass exactly one of input_ids or inputs_embeds.")
    reference = input_ids if input_ids is not None else inputs_embeds
    if reference.dim() >= 2 and 0 in reference.shape[:2]:
        name = "input_ids" if input_ids is not None else "inputs_embeds"
        raise ValueError(
            f"{name} has shape {tuple(reference.shape)}: an empty batch or a sequence of length 0 has nothing to "
            "encode."
        )
    if input_ids is not None:
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (batch_size, seq_len); got shape {tuple(input_ids.shape)}.")
        if input_ids.is_floating_point():
            raise ValueError(f"input_ids must be integer token ids, got dtype {input_ids.dtype}.")
        if value_checks_enabled() and input_ids.numel() > 0:
            low, high = int(input_ids.min()), int(input_ids.max())
            if low < 0 or high >= vocab_size:
                bad = low if low < 0 else high
                raise ValueError(
                    f"input_ids contain token id {bad}, outside the vocabulary [0, {vocab_size}). "
                    "Check that the tokenizer matches the model (or call resize_token_embeddings)."
                )
        return tuple(input_ids.shape)
    if inputs_embeds.dim() != 3:
        raise ValueError(
            f"inputs_embeds must have shape (batch_size, seq_len, hidden_size); got shape {tuple(inputs_embeds.shape)}."
        )
    if embedding_width is not None and inputs_embeds.shape[-1] != embedding_width:
        raise ValueError(
            f"inputs_embeds have width {inputs_embeds.shape[-1]}, the model's word embeddings {embedding_width}: pass "
            "vectors of the size model.get_input_embeddings() returns."
        )
    if value_checks_enabled() and not bool(torch.isfinite(inputs_embeds).all()):
        raise ValueError("inputs_embeds contain NaN or infinity.")
    return tuple(inputs_embeds.shape[:2])


def check_finite_weights(module: torch.nn.Module) -> None:
    """At inference, every weight must be finite: a NaN weight can give a finite, wrong answer (torch's CPU
    attention turns NaN queries into zeros), so a damaged checkpoint is named instead of answering. Checked
    again only after a weight was replaced or changed in place (tensor version counters): an unchanged model
    pays one pass over its weights once."""
    if not value_checks_enabled():
        return
    state = tuple((id(weight), weight._version) for weight in module.parameters())
    if getattr(module, "_finite_weights_state", None) == state:
        return
    damaged = next((name for name, weight in module.named_parameters() if not bool(torch.isfinite(weight).all())), None)
    if damaged is not None:
        raise FloatingPointError(
            f"The weight {damaged} holds NaN or infinity, so the model's answers would be wrong: the checkpoint is "
            "damaged or a training step wrote NaN/inf into it (`hf-variants verify` checks a folder it wrote)."
        )
    module._finite_weights_state = state


def check_finite_output(hidden_states: torch.Tensor, embeddings: torch.Tensor) -> None:
    """At inference, a model whose output is NaN or infinite raises instead of answering: finite inputs of
    an extreme size (e.g. ``inputs_embeds`` of 1e30) overflow float arithmetic inside the model, and
    torch's CPU attention kernels can turn NaN queries into zeros, so such a model would otherwise answer.
    (Training loops stop on a non-finite loss or gradient instead.)"""
    if not value_checks_enabled() or bool(torch.isfinite(hidden_states).all()):
        return
    where = "its embeddings" if not bool(torch.isfinite(embeddings).all()) else "its layers"
    raise FloatingPointError(
        f"The model's output contains NaN or infinity, first in {where}, although its inputs are finite: the "
        f"inputs are too large for {hidden_states.dtype} arithmetic (largest |embedding| "
        f"{float(embeddings.detach().abs().max()):.3g}), or the weights are not finite (check the checkpoint)."
    )


def check_ids_below(name: str, ids: torch.Tensor, limit: int | None, shape: tuple[int, int]) -> None:
    """Check an auxiliary id tensor (token types, positions): its shape, integer dtype and range ``[0, limit)``
    (``limit`` ``None``: no upper bound)."""
    if ids.dim() != 2 or (ids.shape[0] not in (1, shape[0])) or ids.shape[1] != shape[1]:
        raise ValueError(f"{name} must have shape {shape} (or (1, {shape[1]})); got {tuple(ids.shape)}.")
    if ids.is_floating_point():
        raise ValueError(f"{name} must be integers, got dtype {ids.dtype}.")
    if value_checks_enabled() and ids.numel() > 0:
        low, high = int(ids.min()), int(ids.max())
        if low < 0 or (limit is not None and high >= limit):
            bad = low if low < 0 else high
            raise ValueError(f"{name} contain value {bad}, outside [0, {'∞' if limit is None else limit}).")


def resolve_position_ids(
    position_ids: torch.Tensor | None, shape: tuple[int, int], max_positions: int | None, device: torch.device
) -> torch.Tensor:
    """``position_ids`` checked against ``[0, max_positions)``, or ``arange(seq_len)`` by default, with a
    clear error for sequences longer than the position table (``max_positions`` ``None``: no table, no limit)."""
    if position_ids is not None:
        check_ids_below("position_ids", position_ids, max_positions, shape)
        return position_ids
    if max_positions is not None and shape[1] > max_positions:
        raise ValueError(
            f"Sequence length {shape[1]} exceeds max_position_embeddings={max_positions}; "
            "truncate the input (e.g. tokenizer(..., truncation=True, max_length=...))."
        )
    return torch.arange(shape[1], device=device)[None, :]


def embedding_ids(
    input_ids: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
    position_ids: torch.Tensor | None,
    vocab_size: int,
    max_positions: int | None,
    type_vocab_size: int,
    embedding_width: int | None = None,
) -> tuple[tuple[int, int], torch.Tensor, torch.Tensor]:
    """Every check an embedding layer needs: returns ``(shape, position_ids, token_type_ids)`` with
    positions defaulting to ``arange(seq_len)`` and token types to zeros."""
    shape = check_input_ids(input_ids, inputs_embeds, vocab_size, embedding_width)
    device = (input_ids if input_ids is not None else inputs_embeds).device
    position_ids = resolve_position_ids(position_ids, shape, max_positions, device)
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(position_ids)
    else:
        check_ids_below("token_type_ids", token_type_ids, type_vocab_size, shape)
    return shape, position_ids, token_type_ids


def key_padding_mask(attention_mask: torch.Tensor | None, shape: tuple[int, int]) -> torch.Tensor | None:
    """Boolean ``(batch, seq_len)`` mask, ``True`` at real tokens; ``None`` when nothing is padded.

    Raises ``ValueError`` for a wrong shape, values other than 0/1, or a sequence with no real token
    (its attention would be undefined).
    """
    if attention_mask is None:
        return None
    if tuple(attention_mask.shape) != tuple(shape):
        raise ValueError(
            f"attention_mask must have shape (batch_size, seq_len) = {tuple(shape)}; got {tuple(attention_mask.shape)}."
        )
    mask = attention_mask.bool() if attention_mask.dtype == torch.bool else attention_mask != 0
    if value_checks_enabled():
        if attention_mask.dtype != torch.bool and not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
            raise ValueError("attention_mask must contain only 0 (padding) and 1 (real token).")
        if not bool(mask.any(dim=-1).all()):
            raise ValueError("attention_mask has a sequence with no real token (all zeros).")
        if bool(mask.all()):
            return None
    return mask


def flex_block_mask(
    padding_mask: torch.Tensor | None, query_length: int, key_copies: int = 1, documents: torch.Tensor | None = None
) -> Any:
    """``BlockMask`` for ``flex_attention``: every query attends to the real keys of its own document. With
    ``key_copies`` M, the keys are M copies of the sequence side by side (MGK's augmented keys, length M·N).
    ``None`` (no mask) when nothing is padded and each row is one document."""
    if padding_mask is None and documents is None:
        return None
    from torch.nn.attention.flex_attention import create_block_mask

    reference = padding_mask if padding_mask is not None else documents
    batch, seq_len = reference.shape

    def visible_key(batch_index, head_index, query_index, key_index):
        position = key_index % seq_len
        real = padding_mask[batch_index, position] if padding_mask is not None else position >= 0
        if documents is None:
            return real
        same_document = documents[batch_index, query_index] == documents[batch_index, position]
        if padding_mask is not None:  # a padding query sees every real key (as in visible_keys)
            same_document = same_document | ~padding_mask[batch_index, query_index]
        return real & same_document

    return create_block_mask(visible_key, batch, None, query_length, key_copies * seq_len, device=reference.device.type)


def visible_keys(padding_mask: torch.Tensor | None, documents: torch.Tensor | None) -> torch.Tensor | None:
    """Which keys each query may see: boolean ``(batch, 1, seq_len, seq_len)`` when rows hold several documents
    (the real keys of the query's document; a padding query, whose output nothing reads, sees every real key of
    its row, so that no row of the mask is empty on any attention backend), ``(batch, 1, 1, seq_len)`` real keys
    when they do not, ``None`` when nothing is padded either."""
    if documents is None:
        return None if padding_mask is None else padding_mask[:, None, None, :]
    same_document = documents[:, None, :, None] == documents[:, None, None, :]
    if padding_mask is None:
        return same_document
    return (same_document | ~padding_mask[:, None, :, None]) & padding_mask[:, None, None, :]


def packed_documents(position_ids: torch.Tensor | None, batch_size: int) -> torch.Tensor | None:
    """The document of every token when rows hold several documents, ``(batch, seq_len)`` ids counting from 0 in
    each row, read from ``position_ids`` as transformers does for packed sequences (a position that does not
    follow its left neighbour by 1 starts a document: ``find_packed_sequence_indices``); ``None`` when every
    row is one document (or positions were not given)."""
    if position_ids is None or position_ids.shape[-1] < 2:
        return None
    positions = position_ids.expand(batch_size, -1)
    starts = torch.diff(positions, prepend=positions[:, :1] - 1, dim=-1) != 1
    if value_checks_enabled() and not bool(starts.any()):
        return None
    return starts.cumsum(-1)


class TokenLayout:
    """The layout of one forward pass's tokens, in every form a token mixer asks for, each built once:
    which are padding, which document each belongs to, and their rotary position code.

    The backbone makes one per forward and hands it to every layer, as transformers builds its attention mask
    once per forward (``create_bidirectional_mask``) instead of in each layer. ``tensor`` is the boolean
    ``(batch, seq_len)`` mask, ``True`` at real tokens, or ``None`` when nothing is padded; ``documents`` the
    ``(batch, seq_len)`` document ids of packed rows (:func:`packed_documents`), ``None`` when each row is one
    document; ``rotary`` the ``(cos, sin)`` of rotary positions (:mod:`~hf_variants.core.positions`), ``None``
    for learned absolute positions. :meth:`additive`, :meth:`sdpa` and :meth:`flex` give the eager, SDPA and
    flex-attention masks (padding and document boundaries together), built the first time a mixer asks and then
    shared by every layer — and by every function evaluation of an ODE block, which calls its token mixer dozens
    of times per layer.
    """

    def __init__(
        self,
        tensor: torch.Tensor | None,
        documents: torch.Tensor | None = None,
        rotary: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> None:
        self.tensor = tensor
        self.documents = documents
        self.rotary = rotary
        self._forms: dict[tuple[Any, ...], Any] = {}

    def _once(self, key: tuple[Any, ...], build: Any) -> Any:
        if key not in self._forms:
            self._forms[key] = build()
        return self._forms[key]

    def visible(self) -> torch.Tensor | None:
        """The boolean mask of the keys each query may see (:func:`visible_keys`)."""
        return self._once(("visible",), lambda: visible_keys(self.tensor, self.documents))

    def additive(self, dtype: torch.dtype) -> torch.Tensor | None:
        """The eager form: 0 where a query may see a key, the dtype's most negative value elsewhere."""

        def build() -> torch.Tensor | None:
            visible = self.visible()
            if visible is None:
                return None
            return torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill_(
                ~visible, torch.finfo(dtype).min
            )

        return self._once(("additive", dtype), build)

    def sdpa(self, key_copies: int = 1) -> torch.Tensor | None:
        """The boolean form of ``scaled_dot_product_attention`` (``True`` = may attend), for keys that are
        ``key_copies`` copies of the sequence side by side (MGK's augmented keys)."""

        def build() -> torch.Tensor | None:
            visible = self.visible()
            return None if visible is None else visible.repeat(1, 1, 1, key_copies)

        return self._once(("sdpa", key_copies), build)

    def flex(self, query_length: int, key_copies: int = 1) -> Any:
        """The ``BlockMask`` of flex attention (:func:`flex_block_mask`)."""
        return self._once(("flex", query_length, key_copies),
                          lambda: flex_block_mask(self.tensor, query_length, key_copies, self.documents))  # fmt: skip

    def document_one_hot(self, dtype: torch.dtype) -> torch.Tensor | None:
        """``(batch, seq_len, documents)``: 1 where a real token belongs to a document, for mixers that sum over
        a document's tokens (linear attention, the mean); ``None`` when each row is one document."""
        if self.documents is None:
            return None

        def build() -> torch.Tensor:
            count = int(self.documents.max()) + 1
            one_hot = torch.nn.functional.one_hot(self.documents, count).to(dtype)
            return one_hot if self.tensor is None else one_hot * self.tensor[..., None].to(dtype)

        return self._once(("one_hot", dtype), build)
