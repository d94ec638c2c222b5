"""A bfloat16 embedding lookup: token ids pick rows of an embedding table (index_select).

bf16 comes from `ml_dtypes` (numpy has none); lazyfuel moves it as 16-bit data, bit for bit.
"""

import ml_dtypes
import numpy as np

import lazyfuel as lf

vocab, dim, batch, seq = 32_000, 512, 8, 512
rng = np.random.default_rng(0)
table = rng.standard_normal((vocab, dim), dtype=np.float32).astype(ml_dtypes.bfloat16)
tokens = rng.integers(0, vocab, (batch, seq), dtype=np.int32)

emb = lf.index_select(lf.from_array(table, chunks=(8_000, dim)), 0, tokens.reshape(-1))
out = emb.compute().reshape(batch, seq, dim)     # (batch, seq, dim) bfloat16

assert out.dtype == ml_dtypes.bfloat16
assert np.array_equal(out.view(np.uint16), table[tokens].view(np.uint16))  # bit-exact
print(f"looked up {batch}x{seq} tokens in a {vocab}x{dim} bf16 table: {out.shape} {out.dtype}")
