"""Spectral features: pick samples of each signal (gather), zero some (masked_fill), then take
the real FFT along time (rfft), all lazily; compared with numpy.fft."""

import numpy as np

import lazyfuel as lf

rng = np.random.default_rng(0)
waves = rng.standard_normal((2048, 1024), dtype=np.float32)
picks = np.sort(rng.integers(0, 1024, (2048, 512)), axis=1)   # 512 samples kept per signal
drop = rng.random((2048, 512)) < 0.05

x = lf.from_array(waves, chunks=(256, 1024))
spectrum = lf.rfft(lf.masked_fill(lf.gather(x, 1, picks), drop, 0.0), axis=-1)
print(lf.explain(spectrum))
out = spectrum.compute()                                    # complex64, (2048, 257)

want = np.fft.rfft(np.where(drop, 0, np.take_along_axis(waves, picks, axis=1)), axis=-1)
np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)
print(f"rfft features {out.shape} {out.dtype}; match numpy.fft")
