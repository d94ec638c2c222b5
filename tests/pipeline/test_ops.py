"""`lazyfuel.pipeline.ops`: the ops a graph step may name, their value arguments and parameters
(readers and defaults), basic indices read from numpy's syntax, and each op's call giving the
public API's result bit for bit (numpy's, on fresh random data; the CPU backend)."""

from __future__ import annotations

import numpy as np
import pytest

import lazyfuel as lf
from lazyfuel.pipeline.document import GraphError, read
from lazyfuel.pipeline.fields import Scope
from lazyfuel.pipeline.ops import OPS, _index, available_ops

RNG = np.random.default_rng()
SCOPE = Scope("g.yaml", "step 's'", {"k": 2}, "s")


def index(text: str):
    return _index(SCOPE, read(f"v: {text}\n", "g.yaml").value["v"], "index")


def test_the_ops_and_their_keys():
    built_in = ["broadcast_to", "contiguous", "fft", "gather", "getitem", "ifft", "index_select", "irfft",
                "masked_fill", "rfft", "slice", "transpose"]
    # and a step for each op whose graph module declares its builder (none of the built-in ops)
    assert available_ops() == sorted(OPS) == sorted([*built_in, *lf.OP_FUNCTIONS])
    assert OPS["index_select"].keys == ("x", "indices", "dim")
    assert OPS["masked_fill"].keys == ("x", "mask", "value")
    assert OPS["rfft"].keys == ("x", "axis", "n", "norm") and OPS["rfft"].needs == "rfft"
    assert OPS["gather"].params["dim"].required
    defaults = {name: p.default for name, p in OPS["fft"].params.items()}
    assert defaults == {"axis": -1, "n": None, "norm": None}
    assert not OPS["transpose"].params["axes"].required


@pytest.mark.parametrize(("text", "key"), [
    ("'::2, 1:'", (slice(None, None, 2), slice(1, None))),
    ("'..., 0'", (Ellipsis, 0)),
    ("'-1'", (-1,)),
    ("[1, '2:5', '...']", (1, slice(2, 5), Ellipsis)),
    ("'::-1, :'", (slice(None, None, -1), slice(None))),
    ("'$k'", (2,)),
])
def test_a_basic_index_is_read_from_numpys_syntax(text: str, key):
    assert index(text) == key


@pytest.mark.parametrize(("text", "reason"), [
    ("''", "index is empty; write e.g. '::2, 1:'"),
    ("'1:2:3:4'", "index: '1:2:3:4' is not an int, a slice a:b:c or '...'"),
    ("'a:b'", "index: 'a:b' is not an int, a slice a:b:c or '...'"),
    ("'::0'", "index: '::0' has a step of 0"),
])
def test_a_bad_index_is_named(text: str, reason: str):
    with pytest.raises(GraphError) as caught:
        index(text)
    assert (caught.value.line, caught.value.reason) == (1, reason)


def test_each_call_gives_the_apis_bits(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    a = RNG.standard_normal((6, 8)).astype(np.float32)
    idx = RNG.integers(0, 8, size=5)
    gidx = RNG.integers(0, 6, size=(3, 8))
    mask = RNG.random((6, 8)) < 0.5
    cases = {
        "index_select": (OPS["index_select"].call(a, idx, dim=1), a[:, idx]),
        "gather": (OPS["gather"].call(a, gidx, dim=0), np.take_along_axis(a, gidx, 0)),
        "masked_fill": (OPS["masked_fill"].call(a, mask, value=-3.0), np.where(mask, np.float32(-3), a)),
        "transpose": (OPS["transpose"].call(a, axes=None), a.T),
        "slice": (OPS["slice"].call(a, index=(slice(None, None, -2), slice(1, None))), a[::-2, 1:]),
        "getitem": (OPS["getitem"].call(a, index=(Ellipsis, 3)), a[..., 3]),
        "broadcast_to": (OPS["broadcast_to"].call(a[0], shape=(2, 8)), np.broadcast_to(a[0], (2, 8))),
        "contiguous": (OPS["contiguous"].call(a.T), a.T),
    }
    for name, (got, want) in cases.items():
        out = got.compute()
        assert out.dtype == want.dtype and out.shape == want.shape, name
        assert np.ascontiguousarray(out).tobytes() == np.ascontiguousarray(want).tobytes(), name


def test_the_fft_calls_pass_only_what_is_given(monkeypatch):
    monkeypatch.setenv("LAZYFUEL_BACKEND", "cpu")
    a = RNG.standard_normal((4, 16))
    got = OPS["rfft"].call(a, axis=0, n=None, norm=None).compute()
    np.testing.assert_allclose(got, np.fft.rfft(a, axis=0), rtol=1e-12, atol=1e-12)
    got = OPS["irfft"].call(np.fft.rfft(a), axis=-1, n=16, norm="ortho").compute()
    np.testing.assert_allclose(got, np.fft.irfft(np.fft.rfft(a), n=16, norm="ortho"), rtol=1e-12, atol=1e-12)
