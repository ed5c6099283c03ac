"""A campaign's per-check signals in fixed bins that add up across workers: the
error/allowed ratio (decades) and the overflow headroom of the folded weights
(``fold_pressure``: log2 of how close ``|s| * (|W| conv |X|)`` comes to the dtype's largest
value; below 0 there is room, at 0 or above a fold that scales weights overflows)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

__all__ = ["HEADROOM_BINS", "RATIO_BINS", "histograms"]

#: Decade bins of error / allowed: "0" (exact), then 1e-12 and below, ..., 1 and above
#: (above 1 is a finding).
RATIO_BINS = ["0", "<=1e-12", *[f"1e{k}..1e{k + 1}" for k in range(-12, 0)], ">=1"]
#: Bins of fold pressure (log2 headroom): far below, then bands of 16 bits, then >= 0.
HEADROOM_BINS = ["<-128", *[f"{k}..{k + 16}" for k in range(-128, 0, 16)], ">=0"]


def _ratio_bin(ratio: float) -> str:
    if ratio <= 0:
        return RATIO_BINS[0]
    if ratio >= 1:
        return RATIO_BINS[-1]
    decade = math.floor(math.log10(ratio))
    return RATIO_BINS[1] if decade < -12 else f"1e{decade}..1e{decade + 1}"


def _headroom_bin(pressure: float) -> str:
    if pressure >= 0:
        return HEADROOM_BINS[-1]
    if pressure < -128:
        return HEADROOM_BINS[0]
    low = -128 + 16 * int((pressure + 128) // 16)
    return f"{low}..{low + 16}"


def histograms(ratios: Iterable[float], pressures: Iterable[float]) -> dict[str, dict[str, int]]:
    """Counts per bin, every bin present (zeros included), for a JSON summary."""
    ratio_counts = Counter(_ratio_bin(r) for r in ratios)
    headroom_counts = Counter(_headroom_bin(p) for p in pressures if not math.isnan(p))
    return {
        "error_ratio": {b: ratio_counts.get(b, 0) for b in RATIO_BINS},
        "headroom": {b: headroom_counts.get(b, 0) for b in HEADROOM_BINS},
    }
