"""How fast one replica serves: prefill and decode throughput from the device catalogue and the model.

An LLM request has two phases (Splitwise, ISCA 2024, section III): the *prefill* of its context, which is
compute-bound and yields the first token, and the *decode* of the rest, one token per step per request,
which is memory-bandwidth-bound: a step reads every weight and the whole batch's KV cache once, so a
larger batch costs little more per step until compute catches up. The model, per replica with `gpus`
devices' worth (a fraction is a share of one device: its FLOPs, bandwidth and memory scale with it; more
than one is tensor-parallel, taken as linear, which is optimistic by the all-reduce cost):

    prefill_s(c)      = c x 2 x P / (F x PREFILL_MFU)
    step_s(n, k)      = STEP_OVERHEAD_S + max((W + k x KV) / (B x DECODE_MBU), n x 2 x P / (F x PREFILL_MFU))
    kv_capacity       = (M x KV_MEMORY_FRACTION - W) / KV tokens

with P parameters, W weight bytes, KV the KV-cache bytes per token (models.py), F the device's dense FP16
FLOP/s, B its memory bandwidth and M its memory (devices.yaml), c context tokens, n requests in the batch
and k the tokens cached for them.

Constants (assumptions, chosen from published measurements; change them here and the docs table):
- PREFILL_MFU 0.5: model FLOPs utilisation of a prefill. Pope et al., "Efficiently Scaling Transformer
  Inference" (MLSys 2023) reach 76 % in large-batch prefill on TPU v4; GPU serving stacks without their
  layouts are lower, so half of peak.
- DECODE_MBU 0.6: memory-bandwidth utilisation of a decode step; Databricks, "LLM Inference Performance
  Engineering: Best Practices" (2023) measures about 60 % on A100/H100 for 7B-70B models at small batch.
- STEP_OVERHEAD_S 2 ms: the serving loop's per-iteration work (scheduling, sampling, kernel launches).
- KV_MEMORY_FRACTION 0.9: vLLM's default `gpu_memory_utilization`; what is left after weights holds the
  KV cache (activations are neglected).

Serving sizes and simulates replicas with it; sensing's simulated agents time their replicas' requests with
it (the node's GPU model and the task's GPU share).
"""

from __future__ import annotations

from dataclasses import dataclass

from suanli.errors import InvalidArgument
from suanli.replica.models import ModelShape
from suanli.resources import DeviceClass

PREFILL_MFU = 0.5
DECODE_MBU = 0.6
STEP_OVERHEAD_S = 0.002
KV_MEMORY_FRACTION = 0.9
GIB = 1024**3


class ModelDoesNotFit(InvalidArgument):
    """The model's weights do not fit the replica's share of device memory."""


@dataclass(frozen=True, slots=True)
class ReplicaSpeed:
    """One replica's speed: what `prefill_s` and `step_s` compute, and its batch and KV limits."""

    prefill_tokens_per_s: float
    weight_read_s: float  # reading all weights once: the floor of a decode step
    kv_read_s_per_token: float
    compute_s_per_token: float  # decode FLOPs per request per step
    kv_capacity_tokens: int
    max_batch: int

    def prefill_s(self, context_tokens: int) -> float:
        """Time to prefill `context_tokens` (the request's first token comes with it)."""
        return context_tokens / self.prefill_tokens_per_s

    def step_s(self, batch: int, kv_tokens: float) -> float:
        """One decode step of `batch` requests holding `kv_tokens` cached tokens between them."""
        memory = self.weight_read_s + kv_tokens * self.kv_read_s_per_token
        return STEP_OVERHEAD_S + max(memory, batch * self.compute_s_per_token)


def replica_speed(model: ModelShape, device: DeviceClass, gpus: float, max_batch: int) -> ReplicaSpeed:
    """The speed of `model` on `gpus` devices of `device`; `ModelDoesNotFit` when it cannot load."""
    if gpus <= 0:
        raise InvalidArgument(f"a replica needs a GPU share above 0 (got {gpus})")
    if device.bandwidth_gbps is None or device.memory_gib is None:
        raise InvalidArgument(f"device {device.model!r} has no memory or bandwidth figure in the catalogue")
    flops = device.fp16_tflops * 1e12 * gpus * PREFILL_MFU
    bandwidth = device.bandwidth_gbps * 1e9 * gpus * DECODE_MBU
    memory = device.memory_gib * GIB * gpus * KV_MEMORY_FRACTION
    kv_room = memory - model.weight_bytes
    if kv_room <= 0:
        raise ModelDoesNotFit(
            f"{model.name} needs {model.weight_bytes / GIB:.1f} GiB of weights; {gpus:g} x {device.model} "
            f"leaves {memory / GIB:.1f} GiB at {KV_MEMORY_FRACTION:.0%} use"
        )
    return ReplicaSpeed(
        prefill_tokens_per_s=flops / (2 * model.parameters),
        weight_read_s=model.weight_bytes / bandwidth,
        kv_read_s_per_token=model.kv_bytes_per_token / bandwidth,
        compute_s_per_token=2 * model.parameters / flops,
        kv_capacity_tokens=int(kv_room // model.kv_bytes_per_token),
        max_batch=max_batch,
    )
