"""`attn-cost trace` on attention classes of public packages, named as a user names them.

A small set (one Hugging Face decoder, one timm class, one lucidrains module) that runs in CI when the
`trace-test` extra is installed and skips when a package is absent; benchmarks/trace_table.py runs the whole
list. Each class is built here from the package itself and called as its model calls it; FlopCounterMode
and the live-tensor tracer measure that call at sizes other than the example sizes the trace ran at.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # real packages (transformers, timm, local-attention), imported and traced
torch = pytest.importorskip("torch")

from attn_cost.costmodel.conventions import MATMUL  # noqa: E402
from attn_cost.costmodel.symbols import N, b, d, h  # noqa: E402
from real_packages import need  # noqa: E402
from test_trace_written import measured  # noqa: E402


def _traced(spec: str, init: list[str] | None = None, config: Path | None = None, scope: str = "layer"):
    from attn_cost.costmodel.variants import derive
    from attn_cost.profilers.trace import register, traced

    name = register(spec, init, config)
    return derive(name, scope), traced(name)


def _agrees(dv, run, inputs_at, sizes) -> None:
    for at, inputs in ((s, inputs_at(s)) for s in sizes):
        flops, peak = measured(run, inputs)
        subs = {sym: at[k] for k, sym in (("b", b), ("h", h), ("N", N), ("d", d)) if k in at}
        assert int(dv.flops(MATMUL).xreplace(subs)) == flops, at
        assert int(dv.peak("fp32").expr.xreplace(subs)) == peak, at


def test_a_hugging_face_decoder_from_its_config(tmp_path: Path) -> None:
    """LlamaAttention (GQA, RoPE, causal mask from masking_utils), eager, from a config.json."""
    llama = need("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig
    from transformers.masking_utils import create_causal_mask

    settings = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
                "num_hidden_layers": 1}  # fmt: skip
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", **settings}))
    dv, t = _traced("transformers.models.llama.modeling_llama:LlamaAttention", ["attn_implementation=eager"],
                    tmp_path / "config.json")  # fmt: skip
    assert (t.width, t.heads) == (64, 4)

    cfg = LlamaConfig(**settings)
    cfg._attn_implementation = "eager"
    attn, rope = llama.LlamaAttention(cfg, layer_idx=0).eval(), llama.LlamaRotaryEmbedding(config=cfg)

    def run(x):  # what LlamaModel.forward does around one attention layer
        pos = torch.arange(x.shape[1]).unsqueeze(0)
        mask = create_causal_mask(config=cfg, inputs_embeds=x, attention_mask=None, past_key_values=None,
                                  position_ids=pos)  # fmt: skip
        return attn(x, position_embeddings=rope(x, pos), attention_mask=mask)[0]

    _agrees(dv, run, lambda s: [torch.randn(s["b"], s["N"], 64)], [{"b": 3, "N": 20}, {"b": 2, "N": 7}])


def test_timm_attention_unfused_with_an_attribute_set_by_init() -> None:
    """timm's ViT Attention with fused_attn off (an attribute, set by --init like a constructor argument)."""
    timm_attention = need("timm.models.vision_transformer")
    dv, t = _traced("timm.models.vision_transformer:Attention", ["dim=64", "num_heads=4", "qkv_bias=True",
                                                                 "fused_attn=False"])  # fmt: skip
    assert (t.width, t.heads) == (64, 4)
    attn = timm_attention.Attention(64, num_heads=4, qkv_bias=True).eval()
    attn.fused_attn = False
    _agrees(dv, attn, lambda s: [torch.randn(s["b"], s["N"], 64)], [{"b": 3, "N": 20}, {"b": 2, "N": 7}])


@pytest.mark.parametrize("autopad", [False, True])
def test_lucidrains_local_attention_by_its_window(tmp_path: Path, autopad: bool) -> None:
    """local-attention over per-head q, k, v, window 4: without autopad N must be a multiple of 4, and the trace
    says so; with autopad it pads q, k, v to a multiple of 4 and is exact at N = 7, 33 and 8."""
    local = need("local_attention")
    name = "local_autopad" if autopad else "local_causal"  # a traced name is registered once a process
    (tmp_path / f"{name}.py").write_text(
        "from local_attention import LocalAttention\n\n"
        f"ATTN = LocalAttention(window_size=4, causal=True, look_backward=1, autopad={autopad}).eval()\n\n\n"
        f"def {name}(q, k, v):\n    return ATTN(q, k, v)\n"
    )
    dv, t = _traced(f"{tmp_path / name}.py:{name}", scope="core")
    if autopad:
        assert t.recording.pads == 4 and not any("% 4" in c for c in t.conditions)
    else:
        assert "N % 4 == 0" in t.conditions
    attn = local.LocalAttention(window_size=4, causal=True, look_backward=1, autopad=autopad).eval()
    gen = torch.Generator().manual_seed(0)
    sizes = [{"b": 2, "h": 3, "N": 7, "d": 8}, {"b": 1, "h": 2, "N": 33, "d": 16}] if autopad else []
    _agrees(dv, attn, lambda s: [torch.randn(s["b"], s["h"], s["N"], s["d"], generator=gen) for _ in range(3)],
            [*sizes, {"b": 3, "h": 2, "N": 24, "d": 16}, {"b": 2, "h": 3, "N": 8, "d": 8}])  # fmt: skip


def test_a_decoder_wrapped_as_its_model_calls_it(tmp_path: Path) -> None:
    """A user's wrapper doing what LlamaModel does (position ids by arange, masking_utils' mask with them, RoPE),
    sdpa: transformers checks the position ids' values for packed sequences in eager mode; the trace follows
    the eager path (no mask, is_causal), so its peak has no N² term and equals the live peak."""
    need("transformers.models.llama.modeling_llama")
    (tmp_path / "wrapped.py").write_text(
        "import torch\nfrom torch import nn\nfrom transformers import LlamaConfig\n"
        "from transformers.masking_utils import create_causal_mask\n"
        "from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding\n\n\n"
        "class Wrapped(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,\n"
        "                               intermediate_size=128, num_hidden_layers=1, attn_implementation='sdpa')\n"
        "        self.d_embed = 64\n"
        "        self.rope = LlamaRotaryEmbedding(config=self.cfg)\n"
        "        self.attn = LlamaAttention(self.cfg, layer_idx=0)\n\n"
        "    def forward(self, x):\n"
        "        pos = torch.arange(x.shape[1], device=x.device).unsqueeze(0)\n"
        "        mask = create_causal_mask(config=self.cfg, inputs_embeds=x, attention_mask=None,\n"
        "                                  past_key_values=None, position_ids=pos)\n"
        "        return self.attn(x, position_embeddings=self.rope(x, position_ids=pos), attention_mask=mask)[0]\n"
    )
    dv, _ = _traced(f"{tmp_path / 'wrapped.py'}:Wrapped")
    assert dv.peak("fp32").expr.as_poly(N).degree() == 1
    spec = importlib.util.spec_from_file_location("wrapped_measured", tmp_path / "wrapped.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _agrees(dv, module.Wrapped().eval(), lambda s: [torch.randn(s["b"], s["N"], 64)],
            [{"b": 3, "N": 20}, {"b": 2, "N": 7}])  # fmt: skip


@pytest.mark.parametrize("residual", [True, False])
def test_nystrom_pads_to_its_landmarks_and_is_exact_at_every_length(tmp_path: Path, residual: bool) -> None:
    """nystrom-attention pads N up to a multiple of its landmarks (8 here): FLOPs and peak equal FlopCounterMode's
    and the live-tensor tracer's at lengths that are not multiples (7, 33, 13) and at one that is (16); the
    issue's count at N = 7, b = 1 is FlopCounterMode's 439,296."""
    nystrom = need("nystrom_attention")
    args = f"dim=64, heads=4, dim_head=16, num_landmarks=8, pinv_iterations=6, residual={residual}"
    name = f"NYSTROM_{'RESIDUAL' if residual else 'PLAIN'}"
    (tmp_path / "nystrom.py").write_text(f"from nystrom_attention import NystromAttention\n\n{name} = "
                                         f"NystromAttention({args}).eval()\n")  # fmt: skip
    dv, t = _traced(f"{tmp_path / 'nystrom.py'}:{name}")
    assert t.recording.pads == 8 and not any("% 8" in c for c in t.conditions)
    attn = nystrom.NystromAttention(dim=64, heads=4, dim_head=16, num_landmarks=8, pinv_iterations=6,
                                    residual=residual).eval()  # fmt: skip
    gen = torch.Generator().manual_seed(0)
    _agrees(dv, attn, lambda s: [torch.randn(s["b"], s["N"], 64, generator=gen)],
            [{"b": 1, "N": 7}, {"b": 2, "N": 33}, {"b": 3, "N": 13}, {"b": 2, "N": 16}])  # fmt: skip
    if residual:
        assert int(dv.flops(MATMUL).xreplace({N: 7, b: 1})) == 439_296


def test_a_padding_layer_the_issue_does_not_name(tmp_path: Path) -> None:
    """local-attention's LocalMHA (a layer: projections and autopad to its window of 16) traced from an instance,
    exact at lengths that are not multiples of 16 (37, 50) and at one that is (32)."""
    local = need("local_attention")
    (tmp_path / "mha.py").write_text(
        "from local_attention import LocalMHA\n\nATTN = LocalMHA(dim=64, window_size=16, dim_head=16, heads=4, "
        "causal=True).eval()\n"
    )
    dv, t = _traced(f"{tmp_path / 'mha.py'}:ATTN")
    assert t.recording.pads == 16
    attn = local.LocalMHA(dim=64, window_size=16, dim_head=16, heads=4, causal=True).eval()
    gen = torch.Generator().manual_seed(0)
    _agrees(dv, attn, lambda s: [torch.randn(s["b"], s["N"], 64, generator=gen)],
            [{"b": 2, "N": 37}, {"b": 1, "N": 50}, {"b": 3, "N": 32}])  # fmt: skip
