"""A variant from the user's own PyTorch code, run with symbolic sizes and mapped onto the engine's ops.

`attn-cost trace PATH:NAME` builds NAME from PATH: a function `(q, k, v) -> y` over per-head tensors
(b, h, N, d) (an attention core), or an `nn.Module` class whose `forward` takes x of shape (b, N, d_embed)
(a layer; constructor arguments from `--init key=value` and `--config config.json`, a Hugging Face
config file for the attention classes of `transformers`). Two runs of the code with symbolic sizes:

- **as written**: the code runs eagerly on fake tensors whose sizes are symbols (torch's FakeTensorMode
  and ShapeEnv, the machinery under torch.export). A TorchDispatchMode records every ATen op as the
  live-tensor tracer and FlopCounterMode see them on real tensors (matmul's contiguous copies, SDPA's CPU
  kernel reading its mask, dropout in eval as no op at all) and when each storage dies (a Python name
  keeps a tensor alive until it goes out of scope). Every op is mapped onto one of the engine's op kinds
  by a small rule in `aten.RULES` (the style of torch.utils.flop_counter's registry); the deaths become the
  liveness the engine walks. So the FLOPs are FlopCounterMode's and the peak is the live-tensor tracer's,
  as formulas in N; the conditions on the sizes the code branched on are reported ("holds for N ≥ 4").
- **exported graph** (the ideal): `torch.export` with dynamic shapes, mapped by the same rules, every
  tensor freed after its last use. Its peak is reported beside the code's where they differ, with the
  runtime asserts torch.export recorded.

Importing PATH runs its module-level code, as `python PATH` would; what it prints goes to stderr.
Parameters and buffers exist before the call and are not counted in the live set (as in the live-tensor
tracer); the arguments (q, k, v or x) are held by the caller for the whole call.

The modules, in the order a trace runs them: `load` (the user's file, its options, running the code), `adapters`
(one call shape for any attention module, Hugging Face's included), `record` (the eager run on fake tensors),
`export` (torch.export), `aten` (the rules from ATen ops to engine ops), `symbolic` (torch's symbolic sizes as
sympy), `replay` (either recording onto an engine Graph), `register` (trace, register, traced) and `check` (the
traced variant against the real code). Layer: imports `costmodel`, `store` and `measure` (FLOP counter, live-tensor
tracer); torch at the top of every module but this one: the CLI imports them when a command traces.

What the modules share (named without an underscore; a name with one stays inside its module):

- `load`: `user_code` (the user's file and object), `CORE_DIMS`, `LAYER_DIMS`, `SYMBOLS` (the sizes a trace varies),
  `sizes_text` (sizes as the user writes them), `first_line` and `user_line` (an error in one line, and the user's
  frame it came from), `LIBRARY_DIRS` and `PLUMBING` (the frames that are not the user's).
- `adapters`: `Core` (a function (q, k, v) -> y as a module), `adapt` (a Hugging Face attention class with what its
  model hands it), `by_arguments` (a module run as a layer or a core by what its forward takes), `embed_width`,
  `heads_of`.
- `record`: `record` (the eager run), `Meta` (a recorded output's shape, dtype and storage), `RunError` (the user's
  code raised), `symbolic_run` (the patches a run with symbolic sizes needs), `first_tensor`, `run_sizes`,
  `pads_at` (whether a guard is a padding branch's), `transposed_view`, `condition_text`, `where`.
- `symbolic`: `Subs` (torch's size symbols -> the engine's), `engine_expr`, `plain_integer` and `plain_float`
  (torch's size functions as sympy), `FLOAT_FUNCTIONS`, `ceil_symbol` and `on_padding_branch` (sizes on a
  branch that pads N).
- `aten`: `RULES`, `SKIP`, `VIEWS` (the rule of each ATen op), `RuleNode` (what a rule sees), `copy_rule`,
  `FIXED_DTYPES` (torch dtypes by engine name, from `costmodel.dtypes`), `UnmappedError` (no rule maps a node).
- `export`: `export` (torch.export with dynamic shapes) and `Exported` (its program and runtime asserts).
- `replay`: `replay_eager` and `replay_export` (a recording or an exported program onto an engine Graph).
- `register`: `trace`, `register`, `traced`, `exported_peak` (what the CLI calls); `check`: `checked`, `measure`.
"""
