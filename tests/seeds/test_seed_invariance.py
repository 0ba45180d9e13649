"""The pre-filter only saves time, on the seeds' example logs too: each gives the same
whole Analysis with and without hyperscan and however its bytes are split."""

from __future__ import annotations

import random

import pytest

from kb.core import scan
from kb.core.analyze import Analyzer
from tests.seeds.test_seed_matching import EXAMPLES


def _analysis(data: bytes, *, use_hyperscan=None, chunks=None) -> dict:
    analyzer = Analyzer(use_hyperscan=use_hyperscan)
    for piece in chunks or [data]:
        analyzer.feed(piece)
    return analyzer.finish().to_dict()


@pytest.mark.parametrize("slug,name,log,_path", EXAMPLES, ids=[f"{e[0]}/{e[1]}" for e in EXAMPLES])
def test_seed_example_same_with_and_without_hyperscan_and_any_chunking(slug, name, log, _path):
    data = log.encode()
    whole = _analysis(data)
    rng = random.Random(f"{slug}/{name}")
    cuts = sorted(rng.sample(range(1, len(data)), min(7, len(data) - 1))) if len(data) > 1 else []
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
    assert _analysis(data, chunks=chunks) == whole
    if scan.hyperscan is not None:
        assert _analysis(data, use_hyperscan=False) == whole
