"""The "Supported GPUs" table of docs/gpus.md is the catalog's, rendered by tools/doc_tables.py: it
cannot drift (`python -m tools.generate` writes it after a catalog change)."""

from __future__ import annotations

import pytest

from tools.doc_tables import BEGIN, CLOUD_BEGIN, CLOUD_END, END, PAGE, render, render_cloud


@pytest.mark.parametrize(
    "begin, end, rendered",
    [(BEGIN, END, render), (CLOUD_BEGIN, CLOUD_END, render_cloud)],
    ids=["catalog", "cloud-labels"],
)
def test_the_gpus_page_lists_exactly_the_catalogs_gpus(begin, end, rendered):
    text = PAGE.read_text()
    start, stop = text.index(begin), text.index(end) + len(end)
    assert text[start:stop] == rendered(), "the catalog changed: python -m tools.generate"
