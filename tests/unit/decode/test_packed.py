"""seq2seq.decode.packed: bf16 linear layers with oneDNN-laid-out weights give the same outputs."""

import pytest
import torch
from torch import nn

from seq2seq.decode.packed import PackedLinear, can_pack, pack_linears

CPU = torch.device("cpu")
pytestmark = pytest.mark.skipif(not can_pack(CPU), reason="this torch has no oneDNN linear operators")


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("rows", [1, 5, 300])
def test_packed_linear_equals_the_plain_one(bias, rows):
    torch.manual_seed(0)
    linear = nn.Linear(32, 48, bias=bias).to(torch.bfloat16)
    x = torch.randn(rows, 3, 32, dtype=torch.bfloat16)[:, 1]  # (rows, 32), not contiguous
    assert torch.equal(PackedLinear(linear)(x), linear(x))


def test_pack_linears_keeps_the_outputs_and_the_weights_readable(tiny_model):
    model = tiny_model(tie_embeddings="all").to(torch.bfloat16)
    packed = tiny_model(tie_embeddings="all").to(torch.bfloat16)
    pack_linears(packed)
    assert not any(type(m) is nn.Linear for m in packed.modules())
    assert packed.out_proj.weight is packed.tgt_embed.tokens.weight  # still tied
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    tgt = torch.tensor([[2, 5, 6], [2, 8, 9]])
    with torch.no_grad():
        assert torch.equal(packed(src, tgt), model(src, tgt))
    float32 = nn.Sequential(nn.Linear(4, 4))
    pack_linears(float32)
    assert type(float32[0]) is nn.Linear  # only bf16 layers are packed
