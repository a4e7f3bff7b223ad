"""`pack_linear_weights`: linear layers on oneDNN's prepacked matmul compute what `nn.Linear`
computes (to float rounding), on the real model and on odd layers, and leave a model alone
where they do not apply."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from sdk.backends import _cpu_linear
from sdk.backends._cpu_linear import PackedLinear, TiedLinear
from sdk.backends.transformers import pack_linear_weights

pytestmark = pytest.mark.skipif(
    not _cpu_linear._op_available(), reason="this torch build has no oneDNN linear"
)


def _greedy(model: Any, ids: torch.Tensor, n: int) -> tuple[list[int], torch.Tensor]:
    out: list[int] = []
    with torch.inference_mode():
        first = model(input_ids=ids).logits[0, -1]
        logits = first
        for _ in range(n):
            nxt = int(logits.argmax())
            out.append(nxt)
            ids = torch.cat([ids, torch.tensor([[nxt]])], 1)
            logits = model(input_ids=ids).logits[0, -1]
    return out, first


def test_packed_smollm2_writes_what_it_wrote() -> None:
    from sdk.backends.embedded import load_model

    model, tokenizer = load_model("smollm2")
    n_linear = sum(type(m) is torch.nn.Linear for m in model.modules())
    ids = torch.tensor([tokenizer.encode("The weather in Paris today is")])
    want, want_logits = _greedy(model, ids, 8)

    assert pack_linear_weights(model) == n_linear > 0
    assert not any(type(m) is torch.nn.Linear for m in model.modules())
    got, got_logits = _greedy(model, ids, 8)
    assert got == want
    assert float((got_logits - want_logits).abs().max()) < 1e-3
    # the output layer is tied to the embedding: it keeps sharing that weight
    assert model.lm_head.weight is model.model.embed_tokens.weight


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(3, 5), (2, 7, 5), (5,)])
def test_packed_layer_matches_linear(bias: bool, shape: tuple[int, ...]) -> None:
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(5, 11, bias=bias), torch.nn.ReLU())
    x = torch.randn(*shape)
    want = model(x)
    assert pack_linear_weights(model) == 1
    assert isinstance(model[0], PackedLinear)
    got = model(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # a non-contiguous input (a transposed view) reads the same numbers
    xt = torch.randn(5, 4).t()
    torch.testing.assert_close(model(xt), model(xt.contiguous()))


class _Tied(torch.nn.Module):
    def __init__(self, bias: bool) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)
        self.head = torch.nn.Linear(8, 50, bias=bias)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.embed(ids)))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("copy_max", [0, 1 << 30])
def test_tied_output_layers_stay_shared_or_get_a_packed_copy(
    monkeypatch: pytest.MonkeyPatch, bias: bool, copy_max: int
) -> None:
    """A tied output layer over the size cap is multiplied in place (`TiedLinear`, no copy);
    under it, packed next to the embedding. Either way: the same numbers, the tie kept."""
    torch.manual_seed(2)
    model = _Tied(bias)
    ids = [torch.tensor([[3]]), torch.tensor([[1, 4, 9]]), torch.tensor([[5], [7]])]
    want = [model(i) for i in ids]
    monkeypatch.setattr(_cpu_linear, "TIED_COPY_MAX_BYTES", copy_max)
    assert pack_linear_weights(model) == 1
    kind = TiedLinear if copy_max == 0 else PackedLinear
    assert type(model.head) is kind
    assert model.head.weight is model.embed.weight
    for i, w in zip(ids, want, strict=True):
        torch.testing.assert_close(model(i), w, rtol=1e-5, atol=1e-5)


def test_models_it_does_not_apply_to_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    double = torch.nn.Sequential(torch.nn.Linear(4, 4)).double()
    assert pack_linear_weights(double) == 0
    assert type(double[0]) is torch.nn.Linear
    assert pack_linear_weights(object()) == 0

    # a layer that fails the probe stops the swapping there; the layers before it stay packed
    model = torch.nn.Sequential(*(torch.nn.Linear(4, 4) for _ in range(3)))
    verdicts = iter([True, False, True])
    monkeypatch.setattr(_cpu_linear, "_agrees", lambda linear, packed: next(verdicts))
    assert pack_linear_weights(model) == 1
    assert [type(m) for m in model] == [PackedLinear, torch.nn.Linear, torch.nn.Linear]

    monkeypatch.setattr(_cpu_linear, "_op_available", lambda: False)
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 4))
    assert pack_linear_weights(fresh) == 0
