"""Issue 47, classes 5 and 6: every size a measuring command accepts runs or is refused in one line before anything
is allocated; a command offers only the options that can change its answer; every refusal names the user's own
input; a file attn-cost reads and leaves out says why where it is used; an import says what it did."""

from __future__ import annotations

import pytest
from attn_cost.costmodel.errors import UserError

BIG_CHUNK = str(2**32)  # inside --chunk's documented range (at most 2^32)
HUGE = ["--h", "65536", "--b", "1048576"]  # with d = 2^16: 2^52 elements a token in Q (every allocator refuses it)


# -- class 5: sizes no tensor can have are refused before anything is allocated ------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["measure", "--cpu", "--variant", "linear-chunked-fused", "--n", "64", "--chunk", BIG_CHUNK],
        ["measure", "--cpu", "--variant", "linear-chunked", "--n", "64", "--chunk", BIG_CHUNK],
        ["profile", "--cpu", "--pair", "linear-chunked-fused:linear", "--chunk", BIG_CHUNK],
        ["measure", "--cpu", "--variant", "softmax", "--n", str(2**32)],
        ["validate", "--cpu", "--pair", "softmax:linear", *HUGE, "--d", "65536", "--fit-d", "65536", "--fit-d", "8"],
        ["campaign", "--cpu", "--out", "run", "--pair", "softmax:linear", *HUGE, "--d", "65536"],
    ],
)
def test_a_tensor_beyond_what_pytorch_can_hold_is_refused_before_anything_runs(cli, tmp_path, args) -> None:
    """A C×C block of scores at C = 2^32 is 2^64 elements, as is softmax's N×N score matrix at N = 2^32: PyTorch
    cannot even compute such a storage's size (a RuntimeError, not an out-of-memory). The refusal names the user's
    option, and comes before the store (or a campaign's folder) is made."""
    r = cli(*args)
    assert r.code == 2, r.err
    assert r.err.count("\n") == 1 and r.err.startswith("attn-cost: error: "), r.err
    given = next((f"{flag} {args[args.index(flag) + 1]}" for flag in ("--chunk", "--b") if flag in args), "--n")
    assert given in r.err and "2^63 bytes" in r.err, r.err
    assert not (tmp_path / "home").exists() and not (tmp_path / "run").exists()  # nothing made, nothing allocated


def test_a_case_is_never_built_at_sizes_no_tensor_can_have() -> None:
    """The one place every measurement builds its case refuses too (a search that would reach such a length)."""
    from attn_cost.profilers.measure.cases import build_case
    from attn_cost.profilers.measure.sizes import Sizes

    with pytest.raises(UserError, match="--chunk 4294967296"):
        build_case("linear-chunked", "core", Sizes(N=64, d=16, C=2**32))
    build_case("linear-chunked", "core", Sizes(N=64, d=16, C=2**16))  # one chunk of 2^16 tokens: 2^32 scores


def test_a_chunk_longer_than_the_sequence_is_one_whole_chunk(cli) -> None:
    """--chunk C > N: one chunk, padded to C tokens, as the op list writes it and the reference runs it."""
    rows = [
        cli("measure", "--cpu", "--variant", "linear-chunked", "--n", n, "--chunk", "32", "--d", "4", "--json")
        for n in ("24", "32")
    ]
    assert all(r.code == 0 for r in rows), [r.err for r in rows]
    shorter, whole = (r.json()["results"][0] for r in rows)
    assert shorter["seconds"] is not None and shorter["peak_bytes"] == shorter["predicted_peak_bytes"]
    assert shorter["flops_matmul"] == whole["flops_matmul"]  # 24 tokens cost one chunk of 32
