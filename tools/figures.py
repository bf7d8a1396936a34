"""The docs' figures, drawn from measured runs: each `docs/figures/data/<bench>-run<N>.json` is
written by a benchmark's `--json` (bench/control_plane.py, bench/quota_control_plane.py) on the
real control plane, and each SVG beside them is drawn here from all the runs of one benchmark,
side by side, so the picture shows how much two runs on a shared machine agree. Measuring again
is running the benchmark again; drawing is `python -m tools.generate`. No plotting library: bars
and text are all a figure needs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIGURES = ROOT / "docs" / "figures"
DATA = FIGURES / "data"
WIDTH, LABEL, BAR, GAP, TOP = 820, 300, 14, 10, 80
COLOURS = ("#2f6fb0", "#8fb8de", "#c0504d", "#e6a5a3")


@dataclass(frozen=True)
class Bar:
    series: str  # which run (and which measure, where a group shows two)
    value: float
    text: str


def bar_chart(title: str, subtitle: str, where: str, groups: list[tuple[str, list[Bar]]]) -> str:
    """Horizontal bars, one group of them per label, scaled to the largest value."""
    series = list(dict.fromkeys(b.series for _, bars in groups for b in bars))  # as they first appear
    colour = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(series)}
    largest = max(b.value for _, bars in groups for b in bars) or 1.0
    span = WIDTH - LABEL - 190  # room for the value written after the longest bar
    rows, y = [], TOP
    for label, bars in groups:
        rows.append(f'<text x="{LABEL - 8}" y="{y + BAR}" text-anchor="end">{escape(label)}</text>')
        for bar in bars:
            length = max(1.0, span * bar.value / largest)
            rows.append(
                f'<rect x="{LABEL}" y="{y}" width="{length:.1f}" height="{BAR}" fill="{colour[bar.series]}"/>'
                f'<text x="{LABEL + length + 4:.1f}" y="{y + BAR - 3}">{escape(bar.text)}</text>'
            )
            y += BAR + 2
        y += GAP
    legend_y = y + 8
    legend = [
        f'<rect x="{LABEL + i * 150}" y="{legend_y}" width="10" height="10" fill="{colour[name]}"/>'
        f'<text x="{LABEL + i * 150 + 14}" y="{legend_y + 9}">{escape(name)}</text>'
        for i, name in enumerate(series)
    ]
    height = legend_y + 24
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12" role="img" '
        f'aria-label="{escape(title)}">\n'
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>\n'
        f'<text x="12" y="22" font-size="15" font-weight="bold">{escape(title)}</text>\n'
        f'<text x="12" y="42" fill="#555555">{escape(subtitle)}</text>\n'
        f'<text x="12" y="60" fill="#555555">{escape(where)}</text>\n'
    )
    return head + "\n".join(rows + legend) + "\n</svg>\n"


def runs(bench: str) -> list[dict[str, Any]]:
    return [json.loads(path.read_text()) for path in sorted(DATA.glob(f"{bench}-run*.json"))]


def throughput(measured: list[dict[str, Any]]) -> str:
    first = measured[0]
    base = {i: run["setups"]["no admission webhook or policy"]["pods_per_s"] for i, run in enumerate(measured)}
    groups = [
        (
            setup,
            [
                Bar(f"run {i + 1}", run["setups"][setup]["pods_per_s"], _rate(run["setups"][setup], base[i]))
                for i, run in enumerate(measured)
            ],
        )
        for setup in first["setups"]
    ]
    subtitle = f"{first['pods']} GPU pods created by 16 threads through a real kube-apiserver (ratio: to no admission)"
    return bar_chart("GPU pods a second, with and without admission", subtitle, first["measured"], groups)


def _rate(figures: dict[str, float], base: float) -> str:
    return f"{figures['pods_per_s']:.0f} pods/s ({figures['pods_per_s'] / base:.2f}x)"


def latency(measured: list[dict[str, Any]]) -> str:
    first = measured[0]
    groups = [
        (
            f"{hook} {q}",
            [
                Bar(f"run {i + 1}", run["latency"][hook][q], f"{run['latency'][hook][q]:.1f} ms")
                for i, run in enumerate(measured)
            ],
        )
        for hook in first["latency"]
        for q in ("p50", "p99")
    ]
    subtitle = "each webhook call as the API server measures it, during the 16-thread burst of GPU pods"
    return bar_chart("Admission latency under load", subtitle, first["measured"], groups)


def strict_quota(measured: list[dict[str, Any]]) -> str:
    first = measured[0]
    groups = []
    for setup in first["setups"]:
        bars = []
        for i, run in enumerate(measured):
            figures = run["setups"][setup]
            bars.append(
                Bar(
                    f"run {i + 1}",
                    figures["pods_per_s"],
                    f"{figures['pods_per_s']:.0f} pods/s, p99 {figures['p99']:.0f} ms",
                )
            )
        groups.append((setup, bars))
    subtitle = f"{first['pods']} GPU pods by 16 threads, 3 replicas, one budget (p99: the validating webhook's)"
    return bar_chart("A quota exact across replicas, at what cost", subtitle, first["measured"], groups)


def outputs() -> dict[Path, str]:
    control_plane, quota = runs("control-plane"), runs("quota-control-plane")
    found: dict[Path, str] = {}
    if control_plane:
        found[FIGURES / "admission-throughput.svg"] = throughput(control_plane)
        found[FIGURES / "admission-latency.svg"] = latency(control_plane)
    if quota:
        found[FIGURES / "strict-quota.svg"] = strict_quota(quota)
    return found
