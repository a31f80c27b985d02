"""report.html in a real browser: headless Chromium through Playwright, no browser download.

Playwright's Python package drives the system's Chromium (Debian ``chromium``) through
``executable_path``; nothing is fetched. The test skips, with the reason, when either is
missing. Set ``NUMALIGN_CHROMIUM`` to use another binary and ``NUMALIGN_SCREENSHOTS`` to a
directory to keep the full-page screenshots for review.

At a desktop and a phone viewport: no horizontal overflow of the page, every image decoded,
the viewport meta present.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from numalign.sim.cluster import builtin_cluster
from numalign.sim.report import cluster_overview, write_report
from numalign.sim.runner import simulate
from numalign.sim.sources import parse_workload_spec

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

VIEWPORTS = {
    "desktop": {"viewport": {"width": 1280, "height": 900}},
    "mobile": {
        "viewport": {"width": 390, "height": 844},
        "device_scale_factor": 2,
        "is_mobile": True,
        "has_touch": True,
    },
}


def _chromium() -> str | None:
    """The system Chromium binary (the Debian wrapper script's target first)."""
    explicit = os.environ.get("NUMALIGN_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for path in ("/usr/lib/chromium/chromium", "/usr/lib/chromium-browser/chromium-browser"):
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Any:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright (Python package) not installed"
    )
    exe = _chromium()
    if exe is None:
        pytest.skip("no system Chromium (apt-get install chromium, or set NUMALIGN_CHROMIUM)")
    with sync_api.sync_playwright() as pw:
        try:
            b = pw.chromium.launch(executable_path=exe, headless=True)
        except sync_api.Error as e:  # pragma: no cover - depends on the machine
            pytest.skip(f"Chromium at {exe} does not start: {str(e).splitlines()[0]}")
        yield b
        b.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real report: the small cluster, a short synthetic workload, all four profiles."""
    nodes = builtin_cluster("small")
    wl = parse_workload_spec("synthetic:count=150,seed=4", None, cluster=nodes)
    result = simulate(nodes, wl, ["default", "nrt-snn", "volcano", "numalign"], samples=48)
    summary = result.recorder.summary(
        cluster=cluster_overview(nodes, "builtin:small"),
        workload={"spec": "synthetic:count=150,seed=4", "name": wl.name, "pods": len(wl),
                  "description": wl.description},
    )
    out = tmp_path_factory.mktemp("report")
    _, page = write_report(out, summary, result.recorder.series(), result.heatmaps)
    return Path(page)


@pytest.mark.parametrize("kind", list(VIEWPORTS))
def test_report_renders_without_overflow(browser: Any, report: Path, kind: str,
                                         tmp_path: Path) -> None:
    context = browser.new_context(**VIEWPORTS[kind])
    try:
        page = context.new_page()
        page.goto(report.as_uri(), wait_until="load")
        viewport = page.evaluate(
            "document.querySelector('meta[name=viewport]')?.getAttribute('content')"
        )
        assert viewport and "width=device-width" in viewport
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
        assert len(images) == 5
        assert all(i["ok"] and i["shown"] > 0 for i in images), images
        keep = os.environ.get("NUMALIGN_SCREENSHOTS")
        shot = (Path(keep) if keep else tmp_path) / f"report-{kind}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes().startswith(PNG_MAGIC)
    finally:
        context.close()
