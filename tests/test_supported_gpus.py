"""The README's "Supported GPUs" table is the catalog's, rendered by tools/readme_tables.py: it
cannot drift (`python -m tools.generate` writes it after a catalog change)."""

from __future__ import annotations

import pytest

from tools.readme_tables import BEGIN, CLOUD_BEGIN, CLOUD_END, END, README, render, render_cloud


@pytest.mark.parametrize(
    "begin, end, rendered",
    [(BEGIN, END, render), (CLOUD_BEGIN, CLOUD_END, render_cloud)],
    ids=["catalog", "cloud-labels"],
)
def test_the_readme_lists_exactly_the_catalogs_gpus(begin, end, rendered):
    text = README.read_text()
    start, stop = text.index(begin), text.index(end) + len(end)
    assert text[start:stop] == rendered(), "the catalog changed: python -m tools.generate"
