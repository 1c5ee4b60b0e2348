"""The weights of SwiGLU experts as numtk's MoE functions take them (``numtk.moe.moe_forward`` in NumPy and
``numtk.torch.llep`` in torch): a tuple ``(w_gate, w_up, w_down)`` or a dict with those keys, ``w_gate`` and
``w_up`` of shape (M, H, D) and ``w_down`` of shape (M, D, H). Shared here because both areas read them."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["EXPERT_KEYS", "expert_matrices", "check_expert_shapes"]

EXPERT_KEYS = ("w_gate", "w_up", "w_down")
_EXPERT_KEYS = EXPERT_KEYS


def expert_matrices(experts: Any, *, whose: str = "") -> list[Any]:
    """The three weight arrays of ``experts``, a tuple ``(w_gate, w_up, w_down)`` or a dict with those keys,
    unchecked (the NumPy executor and the torch layer check them as arrays or tensors). ``whose`` qualifies
    the experts in the TypeError (e.g. " of this rank's native experts")."""
    if isinstance(experts, Mapping):
        unknown = [k for k in experts if k not in _EXPERT_KEYS]
        missing = [k for k in _EXPERT_KEYS if k not in experts]
        if unknown or missing:
            raise ValueError(f"`experts` as a dict needs exactly the keys {list(_EXPERT_KEYS)}; "
                             f"unknown {unknown}, missing {missing}")
        return [experts[k] for k in _EXPERT_KEYS]
    if isinstance(experts, (tuple, list)):
        if len(experts) != 3:
            raise ValueError(f"`experts` must be (w_gate, w_up, w_down); got a sequence of {len(experts)}")
        return list(experts)
    raise TypeError(f"`experts` must be a tuple (w_gate, w_up, w_down){whose} or a dict with those keys; got "
                    f"{type(experts).__name__}")


def check_expert_shapes(mats: list[Any], D: int, what: str) -> int:
    """``w_gate`` and ``w_up`` of shape (M, H, D), ``w_down`` of shape (M, D, H), H >= 1 (arrays or tensors);
    ``what`` names the M experts in the message. Returns H."""
    wg, wu, wd = (tuple(int(n) for n in m.shape) for m in mats)
    M, H = wg[0], wg[1]
    if wg != (M, H, D) or wu != (M, H, D) or wd != (M, D, H) or H < 1:
        raise ValueError(f"`experts` must hold w_gate and w_up of shape (M, H, D) = ({M}, H, {D}) and w_down of "
                         f"shape (M, D, H), H >= 1, for the M {what}; got {wg}, {wu} and {wd}")
    return H
