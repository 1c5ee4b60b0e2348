"""Pure-Python reference of the least-loaded assignment (LLEP, Nguyen et al., ICML 2026, Alg. 2/3): a literal
sort-and-scan transcription of the numbered steps of spec A2.3 (and the memory filter of A2.4), written
without numtk, for the tests (and as the slow baseline the compiled planner is timed against).

Steps, one layer: experts in decreasing load order (ties: lower id first; zero loads skipped); for expert e
with native device g, take l_e off g's pending load and keep ``avail = cap - assigned[g] - pending[g]``
slots (at most l_e, at least 0) on g. The remainder r spills: scan every other device for the least
effective load ``eff = assigned + pending`` (ties: lower id); with ``a = cap - eff`` it takes
``min(r, a)`` slots when ``a > 0 and (a >= min_chunk or r <= a)``, else all of r (a *forced* chunk).
Conventions shared with numtk: consecutive pieces of one expert on one device are one chunk; with no other
device, or (memory-aware) none with the memory to take its chunk, the remainder stays on g and counts as
forced; the latter lists e among the ``stranded`` experts.

The memory test of device o for c slots of expert e: ``native_bytes[o] + (hosted[o] + new) * expert_bytes
+ token_bytes * (eff[o] + c) <= limit[o]``, new = 0 when o received e before in this visit. With
token_bytes > 0 the native device is held to it too (new = 0): g keeps at most the largest k that passes,
found here from the closed form ``floor((limit - bytes) / token_bytes) - eff`` and then corrected against the
test itself (numtk bisects on the test instead).
"""

from __future__ import annotations

import math
from fractions import Fraction


def capacity(total: int, num_devices: int, alpha: float = 1.0) -> int:
    """ceil(alpha * total / num_devices), exactly, with alpha read as the decimal its shortest repr writes
    (1.1 is 11/10, not the binary double just above it)."""
    a = Fraction(repr(float(alpha)))
    return math.ceil(a * total / num_devices)


def llep_reference(loads, placement, num_devices, cap, min_chunk, memory_limit=None, expert_bytes=0.0,
                   token_bytes=0.0):
    """Chunks [(expert, device, start, stop), ...] in plan order, the forced count and the stranded experts
    (in plan order)."""
    loads = [int(v) for v in loads]
    placement = [int(v) for v in placement]
    N, P = len(loads), int(num_devices)
    pending = [0] * P
    for e in range(N):
        pending[placement[e]] += loads[e]
    assigned = [0] * P
    aware = memory_limit is not None
    if aware:
        limit = [float(v) for v in memory_limit]
        native_count = [0] * P
        for e in range(N):
            native_count[placement[e]] += 1
        native_bytes = [native_count[p] * float(expert_bytes) for p in range(P)]
        hosted = [0] * P
    chunks: list[list[int]] = []
    forced = 0
    stranded: list[int] = []

    def put(e, d, start, stop):
        last = chunks[-1] if chunks else None
        if last is not None and last[0] == e and last[1] == d and last[3] == start:
            last[3] = stop
        else:
            chunks.append([e, d, start, stop])

    order = sorted((e for e in range(N) if loads[e] > 0), key=lambda e: (-loads[e], e))
    for e in order:
        l, g = loads[e], placement[e]
        pending[g] -= l
        avail = cap - assigned[g] - pending[g]
        if avail >= l:                      # case 1
            keep = l
        elif avail > 0:                     # case 2
            keep = avail
        else:                               # case 3
            keep = 0
        if aware and keep and token_bytes > 0:  # the native device's memory room
            eff = assigned[g] + pending[g]
            held = native_bytes[g] + hosted[g] * float(expert_bytes)

            def fits(k):
                return held + float(token_bytes) * (eff + k) <= limit[g]

            if not fits(keep):
                room = (limit[g] - held) / float(token_bytes) - eff
                k = min(max(math.floor(room), 0), keep) if math.isfinite(room) else (keep if room > 0 else 0)
                while k > 0 and not fits(k):
                    k -= 1
                while k < keep and fits(k + 1):
                    k += 1
                keep = k
        if keep:
            put(e, g, 0, keep)
            assigned[g] += keep
        off, r = keep, l - keep
        received = set()
        while r > 0:
            best, best_c = None, 0
            for o in range(P):              # the scan: least eff among the other devices, ties lower id
                if o == g:
                    continue
                eff = assigned[o] + pending[o]
                a = cap - eff
                c = min(r, a) if a > 0 and (a >= min_chunk or r <= a) else r
                if aware:
                    new = 0 if o in received else 1
                    need = native_bytes[o] + (hosted[o] + new) * float(expert_bytes) + float(token_bytes) * (eff + c)
                    if not need <= limit[o]:
                        continue
                if best is None or eff < assigned[best] + pending[best]:
                    best, best_c = o, c
            if best is None:
                put(e, g, off, l)
                assigned[g] += r
                forced += 1
                if aware:
                    stranded.append(e)
                break
            o, c = best, best_c
            if c > cap - (assigned[o] + pending[o]):
                forced += 1
            put(e, o, off, off + c)
            if aware and o not in received:
                received.add(o)
                hosted[o] += 1
            assigned[o] += c
            off += c
            r -= c
    return [tuple(c) for c in chunks], forced, stranded
