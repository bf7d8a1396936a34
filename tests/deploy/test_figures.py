"""The docs' figures are drawn from the measured runs beside them (tools/figures.py): every run's
bar for every setup, its figure written on it, and an SVG any browser reads."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree

from tools.figures import DATA, Bar, bar_chart, outputs, runs

SVG = "{http://www.w3.org/2000/svg}"


def test_each_figure_is_svg_with_a_bar_for_every_run_of_every_setup():
    drawn = outputs()
    assert {path.name for path in drawn} == {"admission-throughput.svg", "admission-latency.svg", "strict-quota.svg"}
    for bench, figure in (("control-plane", "admission-throughput.svg"), ("quota-control-plane", "strict-quota.svg")):
        measured = runs(bench)
        assert len(measured) >= 2  # side by side: one run on a shared machine says little
        (svg,) = [text for path, text in drawn.items() if path.name == figure]
        bars = [e for e in ElementTree.fromstring(svg).iter(f"{SVG}rect") if e.get("height") == "14"]
        assert len(bars) == len(measured) * len(measured[0]["setups"])
        for run in measured:
            for figures in run["setups"].values():
                assert f"{figures['pods_per_s']:.0f} pods/s" in svg


def test_bars_are_scaled_to_the_largest_and_labels_escaped():
    svg = bar_chart("t", "s", "w", [("a <b>", [Bar("run 1", 10.0, "10"), Bar("run 2", 5.0, "5")])])
    widths = [float(e.get("width")) for e in ElementTree.fromstring(svg).iter(f"{SVG}rect") if e.get("height") == "14"]
    assert widths[0] == 2 * widths[1]
    assert "a &lt;b&gt;" in svg


def test_the_data_says_where_it_was_measured():
    for path in DATA.glob("*.json"):
        assert runs(path.stem.rsplit("-run", 1)[0])[0]["measured"]
