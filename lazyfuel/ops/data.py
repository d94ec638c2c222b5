"""Fresh random data for the judge and the audit: the bit patterns a data mover must keep.

`random_array(rng, dtype, shape)` draws varied floats with NaN payloads (quiet and signalling),
-0.0, subnormals, infinities and the largest finite values sprinkled in (`specials`), random bits
for integers and 0/1 for bools; `fill_value` picks a fill value already of the data's dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lazyfuel.dtypes import DType

# (exponent bits, mantissa bits) of each float format, by the numpy kind of its component.
_FORMATS = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}
_COMPONENT = {DType.C64: DType.F32, DType.C128: DType.F64}
SPECIAL_FRACTION = 0.05


def special_bits(exp_bits: int, man_bits: int, rng: np.random.Generator) -> list[int]:
    """Bit patterns arithmetic would change or lose: NaN payloads, -0.0, subnormals, ±inf, ±max."""
    sign, exp = 1 << (exp_bits + man_bits), ((1 << exp_bits) - 1) << man_bits
    quiet = 1 << (man_bits - 1)
    payload = int(rng.integers(1, quiet)) if quiet > 1 else 0
    return [exp | quiet | payload, sign | exp | quiet | payload, exp | max(payload, 1),  # qNaN, -qNaN, sNaN
            sign, 1, sign | 1, (1 << man_bits) - 1,  # -0.0, ±smallest subnormal, largest subnormal
            exp, sign | exp, exp - 1, sign | (exp - 1)]  # ±inf, ±largest finite


def random_array(rng: np.random.Generator, dtype: DType, shape: Sequence[int],
                 specials: bool = True) -> np.ndarray:
    """Fresh data of `dtype`: varied floats (specials sprinkled in), random integer bits, 0/1 bools."""
    shape = tuple(int(s) for s in shape)
    n = math.prod(shape)
    if dtype is DType.BOOL:
        return rng.integers(0, 2, shape).astype(np.bool_)
    component = _COMPONENT.get(dtype, dtype)
    fmt = _FORMATS.get(component.numpy.name)
    count = n * (2 if dtype in _COMPONENT else 1)
    if fmt is None:  # integers: every bit pattern is a value
        return rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype.numpy).reshape(shape)
    reach = min(20, (1 << (fmt[0] - 1)) // 3)  # stay finite: infinities come from the specials
    values = rng.standard_normal(count) * np.exp2(rng.integers(-reach, reach, count))
    words = values.astype(component.numpy).view(f"u{component.itemsize}")
    if specials and count:
        pool = np.array(special_bits(*fmt, rng), dtype=words.dtype)
        picks = rng.random(count) < SPECIAL_FRACTION
        picks[rng.integers(0, count)] = True  # at least one, even in a tiny array
        words[picks] = rng.choice(pool, int(picks.sum()))
    return words.view(dtype.numpy).reshape(shape)


def fill_value(data: np.ndarray, rng: np.random.Generator) -> Any:
    """A fill value already of the data's dtype (its exact bits are kept, NaN payloads included)."""
    flat = data.reshape(-1)
    return flat[int(rng.integers(0, flat.size))] if flat.size else data.dtype.type(0)
