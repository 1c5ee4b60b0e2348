"""
Multi-scale wavelet transformers (:mod:`numtk.torch.mswt`)
==========================================================

.. currentmodule:: numtk.torch.mswt

The discrete wavelet transform in PyTorch and the multi-scale wavelet transformer (MSWT; arXiv 2602.01486)
built on it. The transforms equal PyWavelets' ``pywt.dwt``, ``pywt.idwt``, ``pywt.dwt2`` and
``pywt.idwt2`` for the wavelets and modes offered (Haar, Daubechies 1-38, symlets 2-20, coiflets 1-17, or
any filter bank such as a ``pywt.Wavelet``; the nine PyWavelets modes): to rounding, except the named
symlets, which match to about 1e-10 (PyWavelets' symlet table was computed in double precision and the
filters here are derived exactly). They are batched over any leading
dimensions, run on the input's device and dtype, and are differentiable (to any order). PyWavelets is not
needed: the filters are derived (see :func:`wavelet_filters`).

MSWT learns dynamics in a tokenised wavelet domain: a U-Net over scales whose halvings are a lossless DWT that
keeps the high-frequency sub-bands as channels (:class:`WaveletDownsample`, :class:`WaveletUpsample`), with
attention over DWT-domain tokens (:class:`WaveletAttention`) in pre-LN residual blocks
(:class:`WaveletBlock`). The modules take channel-first maps: (N, C, L) in 1-D, (N, C, H, W) in 2-D.
:class:`MSWT2D` follows the authors' code in its layout (the differences in the attention and the blocks
are listed in its docstring); :class:`MSWT1D` is reconstructed from it (the code is 2-D only).

Importing this module imports torch (``pip install "numtk[torch]"``).

Transforms
----------

.. autosummary::
   :toctree: generated/

   dwt1d             -- one level of the DWT along the last axis (as pywt.dwt).
   idwt1d            -- its inverse (as pywt.idwt).
   dwt2d             -- one level of the 2-D DWT over the last two axes (as pywt.dwt2).
   idwt2d            -- its inverse (as pywt.idwt2).
   stack_subbands    -- the sub-bands of one level concatenated as channels.
   unstack_subbands  -- channels split back into sub-bands.
   wavelet_filters   -- the filter bank (dec_lo, dec_hi, rec_lo, rec_hi) of a named wavelet.

Modules
-------

.. autosummary::
   :toctree: generated/

   WaveletDownsample -- Linear + LayerNorm, DWT (sub-bands as channels), circular convolution.
   WaveletUpsample   -- Linear + LayerNorm, inverse DWT, skip concatenation, circular convolution.
   WaveletAttention  -- multi-head attention over DWT-domain tokens (global or windowed).
   WaveletBlock      -- pre-LN residual block: wavelet attention, then FFN.
   MSWT1D            -- the U-Net over scales for signals (reconstructed).
   MSWT2D            -- the U-Net over scales for fields, as in the MSWT code.

Evaluation
----------

.. autosummary::
   :toctree: generated/

   relative_l2       -- per-sample relative L2 error.
   energy_spectrum   -- energy per wavenumber (one-sided in 1-D, radial shells in 2-D).
   rollout           -- autoregressive rollout of a one-step model.
   demo              -- MSWT against a plain transformer of equal size on Kuramoto-Sivashinsky dynamics.

Constants
---------

.. autosummary::

   WAVELETS          -- the wavelet names: 'haar', 'db1'..'db38', 'sym2'..'sym20', 'coif1'..'coif17'.
   MODES             -- the signal extensions, as PyWavelets names them.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._demo_mswt import demo
from numtk.torch._mswt import (MODES, MSWT1D, MSWT2D, WAVELETS, WaveletAttention, WaveletBlock, WaveletDownsample,
                               WaveletUpsample, dwt1d, dwt2d, energy_spectrum, idwt1d, idwt2d, relative_l2, rollout,
                               stack_subbands, unstack_subbands, wavelet_filters)

__all__ = ["dwt1d", "idwt1d", "dwt2d", "idwt2d", "stack_subbands", "unstack_subbands", "wavelet_filters",
           "WaveletDownsample", "WaveletUpsample", "WaveletAttention", "WaveletBlock", "MSWT1D", "MSWT2D",
           "relative_l2", "energy_spectrum", "rollout", "demo", "WAVELETS", "MODES"]
