"""A sweep's report.html in a real browser (the system Chromium through Playwright, as
tests/test_sim_report_browser.py; skipped with the reason when either is missing): at a
desktop and a phone viewport, no horizontal overflow, every plot decoded and shown.

The report is made from real cells: the grid's cells run here one after the other through the
workers' own function (no Dask needed for the page), with panels, series and seeds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from numalign.sim.sweep import store
from numalign.sim.sweep.cell import CellTask, run_cell
from numalign.sim.sweep.grid import expand
from numalign.sim.sweep.report import report_html
from numalign.sim.sweep.spec import parse_sweep
from test_sim_report_browser import PNG_MAGIC, VIEWPORTS, browser

__all__ = ["browser"]  # the fixture, shared with the simulate report's test
#: three kinds of plot: a count, a share (percent) and a timing
METRICS = ("scheduled", "aligned_fraction", "latency_p99_ms")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("matplotlib")
    spec = parse_sweep({
        "name": "browser",
        "description": "a sweep with panels, series and seeds " + "and a long description " * 8,
        "axes": {"cluster": "builtin:small", "scale": [1, 2],
                 "policy": ["restricted", "single-numa-node"], "profile": ["default", "numalign"],
                 "workload": "synthetic:count=20,load=2", "seed": [1, 2]},
        "report": {"x": "policy", "series": "profile", "panels": ["scale"],
                   "metrics": list(METRICS)}}, "browser.yaml")
    rows = []
    for cell in expand(spec, "test"):
        result = run_cell(CellTask(cell, os.getcwd(), None, "browser-test"))
        assert result["status"] == "ok", result
        rows.append(store.table_row(cell, "ok", store.cell_record(cell, result, "test"), runs=1))
    rows[-1] = {**rows[-1], "status": "failed", "error": "x" * 400}  # a long error wraps
    page = tmp_path_factory.mktemp("sweep-report") / "report.html"
    page.write_text(report_html(spec, rows, {"cells": len(rows), "scheduler": "in-process"}))
    return page


@pytest.mark.parametrize("kind", list(VIEWPORTS))
def test_sweep_report_renders_without_overflow(browser: Any, report: Path, kind: str,
                                               tmp_path: Path) -> None:
    context = browser.new_context(**VIEWPORTS[kind])
    try:
        page = context.new_page()
        page.goto(report.as_uri(), wait_until="load")
        sizes = page.evaluate(
            "({scroll: document.documentElement.scrollWidth,"
            " client: document.documentElement.clientWidth})"
        )
        assert sizes["scroll"] <= sizes["client"], f"{kind}: page overflows horizontally {sizes}"
        wide = page.evaluate(
            """() => [...document.body.querySelectorAll('*')]
                 .filter(e => !e.closest('.scroll'))
                 .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
                 .map(e => e.tagName + '.' + e.className)"""
        )
        assert wide == [], f"{kind}: elements wider than the viewport: {wide}"
        images = page.evaluate(
            "[...document.images].map(i => ({alt: i.alt, ok: i.complete && i.naturalWidth > 0,"
            " shown: i.getBoundingClientRect().width}))"
        )
        assert [i["alt"] for i in images] == list(METRICS)
        assert all(i["ok"] and i["shown"] > 0 for i in images), images
        assert page.locator("h2", has_text="Failed cells (1)").count() == 1
        keep = os.environ.get("NUMALIGN_SCREENSHOTS")
        shot = (Path(keep) if keep else tmp_path) / f"sweep-report-{kind}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes().startswith(PNG_MAGIC)
    finally:
        context.close()
