"""Linear layers on oneDNN's prepacked matmul, for float32 models on a CPU.

torch's `nn.Linear` on CPU calls MKL's sgemm, which is slow for the shapes decoding has: a few
rows against a large weight. Measured on SmolLM2-135M (2-core AMD EPYC, one thread): a decode
step of one row 41 -> 31 ms, of eight rows 91 -> 56 ms; the 49,152-row output layer alone
7 -> 2.5 ms; a 290-token prefill 0.76 -> 0.40 s. oneDNN (bundled with every x86 CPU build of
torch) reaches this with the weight reordered once into its blocked layout, which is what
`torch.compile` does for CPU linears when it freezes a model; here without compiling anything.

The numbers differ from MKL's by float rounding only (max |logit difference| ~1e-4 on
SmolLM2): a probe checks every packed layer against `F.linear` before it is swapped in, and
anything unusual (no oneDNN, another dtype or device, the op missing) leaves the model as is.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["PackedLinear", "TiedLinear", "pack_linear_weights"]

#: The row count oneDNN picks its blocking for; any row count works (checked by the probe).
_BATCH_HINT = 8
_PROBE_ROWS = (1, 3, 17)


def _op_available() -> bool:
    mkldnn = getattr(torch.ops, "mkldnn", None)
    return (
        torch.backends.mkldnn.is_available()
        and mkldnn is not None
        and hasattr(mkldnn, "_reorder_linear_weight")
        and hasattr(mkldnn, "_linear_pointwise")
    )


class _FlatLinear(torch.nn.Module):
    """What both replacements share: `nn.Linear`'s sizes and bias, and inputs of any leading
    shape flattened to rows for `_rows`."""

    kind = ""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.register_buffer(
            "bias", None if linear.bias is None else linear.bias.detach(), persistent=False
        )

    def _rows(self, flat: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = self._rows(x.reshape(-1, shape[-1]))
        return y.reshape(*shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.kind}"


class PackedLinear(_FlatLinear):
    """An `nn.Linear` whose weight lives in oneDNN's layout. `weight` stays only when another
    module shares it (a tied output layer): its memory is the embedding's."""

    kind = "oneDNN"

    def __init__(self, linear: torch.nn.Linear, *, keep_weight: bool) -> None:
        super().__init__(linear)
        weight = linear.weight.detach()
        self.register_buffer(
            "packed", torch.ops.mkldnn._reorder_linear_weight(weight, _BATCH_HINT), persistent=False
        )
        if keep_weight:
            self.weight = linear.weight

    def _rows(self, flat: torch.Tensor) -> torch.Tensor:
        if not flat.is_contiguous():
            flat = flat.contiguous()
        return torch.ops.mkldnn._linear_pointwise(flat, self.packed, self.bias, "none", [], "")


class TiedLinear(_FlatLinear):
    """A big output layer tied to the embedding, multiplied as `W @ xᵀ` with at least two
    columns: MKL's fast sgemm path (a single row goes to its slow matrix-vector one), without
    a packed copy. Gemma-3's 262,144 x 640 output layer: a decode step 63 -> 49 ms, where a
    packed copy reaches 38 ms for 670 MB more memory."""

    kind = "tied"

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__(linear)
        self.weight = linear.weight

    def _rows(self, flat: torch.Tensor) -> torch.Tensor:
        rows = flat.shape[0]
        if rows == 1:  # a real second column: a stride-0 one sends MKL down a slow path
            flat = torch.cat([flat, flat])
        y = torch.mm(self.weight, flat.t()).t()[:rows]
        bias = self.bias
        return y + bias if isinstance(bias, torch.Tensor) else y


#: A tied output layer's weight up to this size gets a packed copy next to the embedding
#: (SmolLM2: 113 MB, a step 2 ms faster than `TiedLinear`); above it, `TiedLinear`.
TIED_COPY_MAX_BYTES = 256 << 20


def _agrees(linear: torch.nn.Linear, packed: torch.nn.Module) -> bool:
    gen = torch.Generator().manual_seed(0)
    for rows in _PROBE_ROWS:
        x = torch.randn(rows, linear.in_features, generator=gen)
        want = torch.nn.functional.linear(x, linear.weight, linear.bias)
        got = packed(x)
        scale = float(want.abs().max()) + 1.0
        if got.shape != want.shape or not bool(torch.isfinite(got).all()):
            return False
        if float((got - want).abs().max()) > 1e-4 * scale:
            return False
    return True


def pack_linear_weights(model: Any) -> int:
    """Swap the float32 CPU `nn.Linear` layers of `model` for `PackedLinear` (a big output
    layer tied to the embedding: `TiedLinear`), in place; the number swapped (0: left as it
    was; a layer that fails the probe stops the swapping there).

    For inference only: afterwards the model must stay on the CPU in float32 (moving it would
    leave the packed weights behind), and a checkpoint saved from it lacks those weights."""
    if not isinstance(model, torch.nn.Module) or not _op_available():
        return 0
    params = list(model.parameters())
    if not params or any(p.device.type != "cpu" or p.dtype != torch.float32 for p in params):
        return 0
    uses: dict[int, int] = {}
    for module in model.modules():
        for p in module.parameters(recurse=False):
            uses[id(p)] = uses.get(id(p), 0) + 1
    names = [
        name for name, module in model.named_modules() if type(module) is torch.nn.Linear and name
    ]
    swapped = 0
    with torch.no_grad():
        for name in names:  # one at a time: the replaced weight is freed before the next
            parent_name, _, attr = name.rpartition(".")
            parent = model.get_submodule(parent_name)
            linear = getattr(parent, attr)
            tied = uses.get(id(linear.weight), 0) > 1
            big = linear.weight.nelement() * linear.weight.element_size() > TIED_COPY_MAX_BYTES
            try:
                packed = (
                    TiedLinear(linear) if tied and big else PackedLinear(linear, keep_weight=tied)
                )
            except RuntimeError:
                break
            if not _agrees(linear, packed):
                break  # every layer swapped so far computes what it did
            setattr(parent, attr, packed)
            swapped += 1
        if swapped:
            _own_memory(model)
    return swapped


def _own_memory(model: torch.nn.Module) -> None:
    """Copy what is left of the weights out of the checkpoint's memory map. Loaded weights are
    views of the mapped file: one tensor still viewing it (the embedding) keeps every page of
    it resident, the replaced weights' too (on SmolLM2 680 MB of a 1.5 GB RSS)."""
    packed = {id(m.packed) for m in model.modules() if isinstance(m, PackedLinear)}
    for tensor in [*model.parameters(), *model.buffers()]:
        if id(tensor) not in packed and tensor.layout is torch.strided:
            tensor.data = tensor.data.clone()
