"""The shapes of the language models a service may serve: what the service-time model needs of each.

A decode step reads every weight once and every cached key/value of the batch once, so the model's size in
bytes and its KV-cache bytes per token decide the memory traffic; its parameter count decides the FLOPs
(2 per parameter per token). Weights are FP16 (2 bytes per parameter).

Sources: Touvron et al., "Llama 2: Open Foundation and Fine-Tuned Chat Models" (2023), Table 1 and
section 2.2 (70B uses grouped-query attention with 8 KV heads); the models' published `config.json`
(`num_hidden_layers`, `hidden_size`, `num_key_value_heads`, head size 128). Parameter counts are the
released checkpoints' (6.74 B, 13.0 B, 69.0 B).
"""

from __future__ import annotations

from dataclasses import dataclass

BYTES_PER_PARAMETER = 2  # FP16 / BF16 weights
BYTES_PER_KV_VALUE = 2  # FP16 KV cache


@dataclass(frozen=True, slots=True)
class ModelShape:
    """A model's size: parameters, layers and the width of its K (or V) per layer and token."""

    name: str
    parameters: float
    layers: int
    kv_dim: int  # KV heads x head size: the width of one layer's K (or V) per token

    @property
    def weight_bytes(self) -> float:
        """The weights' size in bytes."""
        return self.parameters * BYTES_PER_PARAMETER

    @property
    def kv_bytes_per_token(self) -> float:
        """K and V of every layer for one token of context."""
        return 2 * self.layers * self.kv_dim * BYTES_PER_KV_VALUE


MODELS: dict[str, ModelShape] = {
    m.name: m
    for m in (
        ModelShape("llama-2-7b", 6.74e9, layers=32, kv_dim=32 * 128),
        ModelShape("llama-2-13b", 13.0e9, layers=40, kv_dim=40 * 128),
        ModelShape("llama-2-70b", 69.0e9, layers=80, kv_dim=8 * 128),
    )
}
