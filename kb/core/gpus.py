"""GPU families: matching and fix applicability compare GPUs by architecture, since a
crash on an H100 says something about an H200 and little about a V100."""

from __future__ import annotations

import re

# GPU model -> family, first match wins. Sample: "NVIDIA H100 80GB HBM3" -> hopper.
GPU_FAMILIES: tuple[tuple[str, str], ...] = (
    (r"\bGB?[23]00\b|\bB[12]00\b|RTX\s*PRO\s*6000|RTX\s*50\d0|\bGB10\b", "blackwell"),
    (r"\bG?H[12]00\b|\bH20\b|\bH800\b|\bGH200\b", "hopper"),
    (r"\bL40S?\b|\bL4\b|RTX\s*40\d0|RTX\s*6000\s*Ada|\bL20\b", "ada"),
    (r"\bA100\b|\bA800\b|\bA10G?\b|\bA30\b|\bA40\b|\bA6000\b|RTX\s*30\d0|RTX\s*A\d+", "ampere"),
    (r"\bT4\b|RTX\s*20\d0|Quadro\s*RTX", "turing"),
    (r"\bV100\b|Titan\s*V\b", "volta"),
    (r"\bP100\b|\bP40\b|\bP4\b|GTX\s*10\d0", "pascal"),
    (r"\bMI\d{3}", "cdna"),
)


def gpu_family(name: str | None) -> str | None:
    """Family of a GPU name as logs print it; None when unknown."""
    if not name:
        return None
    for pattern, family in GPU_FAMILIES:
        if re.search(pattern, name, re.IGNORECASE):
            return family
    lowered = name.strip().lower()
    known = {family for _, family in GPU_FAMILIES}
    return lowered if lowered in known else None
