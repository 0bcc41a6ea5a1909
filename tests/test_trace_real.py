"""`attn-cost trace` on attention classes of public packages, named as a user names them.

A small set (one Hugging Face decoder, one timm class, one lucidrains module) that runs in CI when the
`trace-test` extra is installed and skips when a package is absent; benchmarks/trace_table.py runs the whole
list. Each class is built here from the package itself and called as its model calls it; FlopCounterMode
and the live-tensor tracer measure that call at sizes other than the example sizes the trace ran at.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.packages]  # real packages (transformers, timm, local-attention)
torch = pytest.importorskip("torch")

from attn_cost.costmodel.conventions import MATMUL  # noqa: E402
from attn_cost.costmodel.symbols import N, b, d, h  # noqa: E402
from real_packages import need  # noqa: E402
from test_trace_written import measured  # noqa: E402


def _traced(spec: str, init: list[str] | None = None, config: Path | None = None, scope: str = "layer"):
    from attn_cost.costmodel.variants import derive
    from attn_cost.profilers.trace.register import register, traced

    name = register(spec, init, config)
    return derive(name, scope), traced(name)


def _agrees(dv, run, inputs_at, sizes) -> None:
    for at, inputs in ((s, inputs_at(s)) for s in sizes):
        flops, peak = measured(run, inputs)
        subs = {sym: at[k] for k, sym in (("b", b), ("h", h), ("N", N), ("d", d)) if k in at}
        assert int(dv.flops(MATMUL).xreplace(subs)) == flops, at
        assert int(dv.peak("fp32").expr.xreplace(subs)) == peak, at


def _mask_arguments(make, x, pos) -> dict:
    """What LlamaModel passes transformers' mask function besides the config for no cache and no padding, in
    the names the installed release declares (5.24 requires `cache`; 4.56 took `input_embeds`,
    `past_key_values` and `cache_position`)."""
    names = inspect.signature(make).parameters
    if "cache" in names:
        return {"inputs_embeds": x, "attention_mask": None, "cache": None, "position_ids": pos}
    return {"input_embeds": x, "attention_mask": None, "past_key_values": None, "position_ids": pos,
            "cache_position": pos[0]}  # fmt: skip


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
        mask = create_causal_mask(config=cfg, **_mask_arguments(create_causal_mask, x, pos))
        return attn(x, position_embeddings=rope(x, pos), attention_mask=mask)[0]

    _agrees(dv, run, lambda s: [torch.randn(s["b"], s["N"], 64)], [{"b": 3, "N": 20}, {"b": 2, "N": 7}])


_DECODER = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
            "num_hidden_layers": 2, "vocab_size": 32}  # fmt: skip
DECODERS = {
    "llama": ("llama", "LlamaAttention", _DECODER),
    "mistral": ("mistral", "MistralAttention", {**_DECODER, "sliding_window": 4}),
    "qwen2": ("qwen2", "Qwen2Attention", {**_DECODER, "use_sliding_window": True, "sliding_window": 4,
                                          "max_window_layers": 0}),
    "gemma": ("gemma", "GemmaAttention", {**_DECODER, "head_dim": 16}),
    "gemma2": ("gemma2", "Gemma2Attention", {**_DECODER, "head_dim": 16, "sliding_window": 4}),  # eager only
    "gemma3_text": ("gemma3", "Gemma3Attention", {**_DECODER, "head_dim": 16, "sliding_window": 4,
                                                  "rope_theta": 10_000.0, "rope_local_base_freq": 10_000.0}),
    "phi3": ("phi3", "Phi3Attention", {**_DECODER, "pad_token_id": 0, "sliding_window": 4}),
    "gpt_neox": ("gpt_neox", "GPTNeoXAttention", {k: v for k, v in _DECODER.items() if k != "num_key_value_heads"}),
    "falcon": ("falcon", "FalconAttention", {"hidden_size": 64, "num_attention_heads": 4, "num_kv_heads": 2,
                                            "new_decoder_architecture": True, "num_hidden_layers": 2,
                                            "vocab_size": 32}),
    "starcoder2": ("starcoder2", "Starcoder2Attention", {**_DECODER, "sliding_window": 4}),
}  # fmt: skip
"""Decoder families from tiny configs (width 64, 4 heads): sliding windows of 4 where the family has them
(Qwen2's from layer 0 on, Gemma 2 and 3 on their first layer), Gemma 3 with a RoPE per layer type."""


@pytest.mark.parametrize("model_type", DECODERS)
def test_decoder_attentions_from_their_configs_run_as_their_model_runs_them(tmp_path: Path, model_type) -> None:
    """The model itself is the reference: its first attention layer, run inside the whole model at N = 12
    (three windows), returns what the class traced from the config returns on the same input with the same
    weights, eager and sdpa (same mask, same rotary embedding); the eager trace's formulas equal
    FlopCounterMode and the live-tensor peak of that call at other sizes."""
    folder, cls, settings = DECODERS[model_type]
    need(f"transformers.models.{folder}.modeling_{folder}")
    from attn_cost.profilers.trace.load import build, load_config, load_object, split_spec
    from transformers import AutoConfig, AutoModel

    spec = f"transformers.models.{folder}.modeling_{folder}:{cls}"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type, **settings}))
    for impl in ("eager", "sdpa"):
        cfg = AutoConfig.for_model(model_type, **settings)
        cfg._attn_implementation = impl
        try:
            model = AutoModel.from_config(cfg).eval()
        except ValueError:  # Gemma 2 caps its logits, which SDPA cannot: transformers refuses the model
            assert impl == "sdpa" and model_type == "gemma2"
            continue
        ref = next(m for m in model.modules() if type(m).__name__ == cls)
        seen: dict = {}

        def keep(module, args, kwargs, out, seen=seen):
            seen["x"], seen["y"] = (args[0] if args else kwargs["hidden_states"]), out[0]

        ref.register_forward_hook(keep, with_kwargs=True)
        with torch.no_grad():
            model(inputs_embeds=torch.randn(2, 12, 64, generator=torch.Generator().manual_seed(0)))
        path, name = split_spec(spec)
        ours = build(load_object(path, name)[1], path, name, {"attn_implementation": impl},
                     load_config(tmp_path / "config.json")).eval()  # fmt: skip
        ours.attn.load_state_dict(ref.state_dict())
        with torch.no_grad():
            torch.testing.assert_close(ours(seen["x"]), seen["y"], msg=f"{model_type}, {impl}")
    dv, t = _traced(spec, ["attn_implementation=eager"], tmp_path / "config.json")
    _agrees(dv, t.module, lambda s: [torch.randn(s["b"], s["N"], 64)], [{"b": 3, "N": 10}, {"b": 2, "N": 7}])


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
    sdpa: transformers 5 checks the position ids' values for packed sequences in eager mode; the trace follows
    the eager path (no mask, is_causal), so its peak has no N² term and equals the live peak. transformers 4.56
    keeps a packed-sequence mask whatever the values, and materialises the N² mask: the trace does too."""
    need("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig
    from transformers.masking_utils import create_causal_mask

    cfg = LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
                      num_hidden_layers=1, attn_implementation="sdpa")  # fmt: skip
    x, pos = torch.randn(2, 8, 64), torch.arange(8).unsqueeze(0)
    materialised = create_causal_mask(config=cfg, **_mask_arguments(create_causal_mask, x, pos)) is not None
    (tmp_path / "wrapped.py").write_text(
        "import inspect\n\nimport torch\nfrom torch import nn\nfrom transformers import LlamaConfig\n"
        "from transformers.masking_utils import create_causal_mask\n"
        "from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding\n\n"
        "NAMES = inspect.signature(create_causal_mask).parameters\n"
        "EMBEDS = 'inputs_embeds' if 'inputs_embeds' in NAMES else 'input_embeds'\n\n\n"
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
        "        cache = {'cache': None} if 'cache' in NAMES else {'past_key_values': None, 'cache_position': pos[0]}\n"
        "        mask = create_causal_mask(config=self.cfg, **{EMBEDS: x}, attention_mask=None, position_ids=pos,\n"
        "                                  **cache)\n"
        "        return self.attn(x, position_embeddings=self.rope(x, position_ids=pos), attention_mask=mask)[0]\n"
    )
    dv, _ = _traced(f"{tmp_path / 'wrapped.py'}:Wrapped")
    assert dv.peak("fp32").expr.as_poly(N).degree() == (2 if materialised else 1)
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
