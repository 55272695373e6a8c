"""Inline SVG charts: parseable, one bar per measured value, every text escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tko.base import svg_chart

NS = {"s": "http://www.w3.org/2000/svg"}


def test_kernel_bars_one_bar_per_value_and_missing_ones_listed():
    svg = svg_chart.kernel_bars("k", [("kernel", 0.2655), ("memory twin", 0.25), ("copy floor", 0.1264),
                                      ("best sweep variant", None)], reference=0.1264)
    root = ET.fromstring(svg)
    bars = root.findall(".//s:rect[@class='bar']", NS)
    assert [b.get("data-label") for b in bars] == ["kernel", "memory twin", "copy floor"]
    widths = [float(b.get("width")) for b in bars]
    assert widths[0] > widths[1] > widths[2]                       # one scale for all
    assert widths[2] / widths[0] == __import__("pytest").approx(0.1264 / 0.2655, rel=1e-3)
    missing = [t.text for t in root.findall(".//s:text[@class='missing']", NS)]
    assert missing == ["not measured"]
    labels = [t.text for t in root.findall(".//s:text[@class='label']", NS)]
    assert labels[-1] == "best sweep variant"
    assert root.find(".//s:line[@class='reference']", NS) is not None
    assert "265.5 us" in [t.text for t in root.findall(".//s:text[@class='value']", NS)]


def test_untrusted_names_are_escaped():
    evil = 'k<script>alert("x")</script>&\'q'
    svg = svg_chart.kernel_bars(evil, [(evil, 1.0)])
    assert "<script>" not in svg
    root = ET.fromstring(svg)
    assert root.find("s:title", NS).text == evil
    assert root.get("aria-label") == evil
    assert root.find(".//s:rect", NS).get("data-label") == evil
    chart = svg_chart.hot_kernels_chart("hot", [{"name": evil, "share": 0.4, "gap": 2.0}])
    root = ET.fromstring(chart)
    assert root.find(".//s:rect[@class='share']", NS).get("data-label") == evil
    assert root.find(".//s:text[@class='label']/s:title", NS).text == evil


def test_hot_kernels_chart_share_and_gap():
    kernels = [{"name": "triton_red_softmax", "share": 0.6, "gap": 2.1},
               {"name": "triton_poi_gelu", "share": 0.3, "gap": 1.05},
               {"name": "triton_poi_tiny", "share": 0.1, "gap": None}]
    root = ET.fromstring(svg_chart.hot_kernels_chart("investigation", kernels))
    shares = root.findall(".//s:rect[@class='share']", NS)
    gaps = root.findall(".//s:rect[@class='gap']", NS)
    assert [float(r.get("data-value")) for r in shares] == [0.6, 0.3, 0.1]
    assert [float(r.get("data-value")) for r in gaps] == [2.1, 1.05]
    assert float(shares[0].get("width")) == 2 * float(shares[1].get("width"))
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "2.10x floor" in texts and "no floor" in texts and "60.0 %" in texts


def test_an_unknown_share_is_said_not_drawn_as_zero():
    """Without a profile the shares are unknown: no bar, no "0.0 %"; the investigation drops a chart
    that knows neither a share nor a floor of any kernel."""
    from tko.chains.investigation_index import index_chart

    root = ET.fromstring(svg_chart.hot_kernels_chart("hot", [{"name": "k", "share": None, "gap": 1.5}]))
    assert root.findall(".//s:rect[@class='share']", NS) == []
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "share unknown" in texts and "0.0 %" not in texts and "1.50x floor" in texts
    assert index_chart({"kernels": [{"kernel": "k", "share": None, "sol_over_floor": None}]}) is None
    assert index_chart({"kernels": [{"kernel": "k", "share": 0.5, "sol_over_floor": None}]}) is not None


def test_percent_unit():
    root = ET.fromstring(svg_chart.kernel_bars("pct", [("kernel", 48.0), ("memory twin", 97.0)], unit="%"))
    assert [t.text for t in root.findall(".//s:text[@class='value']", NS)] == ["48.0 %", "97.0 %"]
