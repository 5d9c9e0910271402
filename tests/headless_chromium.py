"""Headless Chromium for the tests that look at what a person would see, with no network.

:func:`look` opens a page of outputs (each an SVG or the HTML a notebook cell produced) from a
``file:`` URL with every network request refused, lets its scripts run, and reports what the
browser drew: for each output, the boxes of its SVGs and texts as laid out, and how many data
marks it painted in which colours (SVG marks, or canvas pixels). Chromium reaches no network
here: every request, loopback included, goes to a proxy that is not there
(``--proxy-server`` with ``<-loopback>``), and no host name resolves. ``tests/test_notebooks.py``
checks that this is so: a page that needs its script from a loopback server draws nothing.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRED = os.environ.get("SAFECONS_REQUIRE_CHROMIUM") == "1"  # set by .ci/run

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)
NO_NETWORK = (
    "--proxy-server=127.0.0.1:9",  # the discard port: nothing listens, every request fails
    "--proxy-bypass-list=<-loopback>",  # loopback too, which a proxy otherwise never sees
    "--host-resolver-rules=MAP * ~NOTFOUND",
)


def browser_test(test: Callable[..., Any]) -> Callable[..., Any]:
    """Marks a test that runs Chromium: slow, network (the browser probes it even on a
    ``file:`` page), skipped without Chromium unless ``SAFECONS_REQUIRE_CHROMIUM=1``."""
    marks = [
        pytest.mark.slow,
        pytest.mark.network,
        pytest.mark.skipif(
            CHROMIUM is None and not REQUIRED, reason="Chromium not installed (.ci/run installs it)"
        ),
    ]
    for mark in marks:
        test = mark(test)
    return test


# Run once the page has loaded and its scripts had two seconds (of virtual time) to draw.
_LOOK = """
function hex(color) {
  const m = /rgba?\\((\\d+), (\\d+), (\\d+)(?:, ([\\d.]+))?\\)/.exec(color || "");
  if (!m || (m[4] !== undefined && +m[4] === 0)) return null;
  return "#" + [m[1], m[2], m[3]].map((v) => (+v).toString(16).padStart(2, "0")).join("");
}
function shown(el) {  // Vega hides a label it drops for overlap with opacity 0
  for (; el && el.tagName !== "BODY"; el = el.parentElement) {
    const style = getComputedStyle(el);
    if (+style.opacity === 0 || style.display === "none" || style.visibility !== "visible") {
      return false;
    }
  }
  return true;
}
function box(el) {
  const r = el.getBoundingClientRect();
  return [r.left, r.top, r.right, r.bottom];
}
function look() {
  const seen = [];
  for (const output of document.querySelectorAll(".output")) {
    const svgs = [...output.querySelectorAll("svg")];
    const drawn = {svgs: svgs.map(box), texts: [], marks: 0, colors: {}};
    for (const text of output.querySelectorAll("svg text")) {
      const r = text.getBoundingClientRect();
      if (!text.textContent.trim() || r.width === 0 || !shown(text)) continue;
      const role = text.closest("g[class*='role-']");
      drawn.texts.push({
        text: text.textContent,
        role: role ? role.getAttribute("class") : "",
        svg: svgs.indexOf(text.closest("svg")),
        box: box(text),
      });
    }
    for (const el of output.querySelectorAll("svg path, svg rect, svg circle, svg polygon")) {
      const role = el.closest("g[class*='role-']");
      if (!role || !/\\brole-mark\\b/.test(role.getAttribute("class"))) continue;
      const r = el.getBoundingClientRect();
      const style = getComputedStyle(el);
      const fill = hex(style.fill);
      if (r.width * r.height < 1 || !fill || !shown(el)) continue;
      drawn.marks += 1;
      drawn.colors[fill] = (drawn.colors[fill] || 0) + 1;
    }
    for (const canvas of output.querySelectorAll("canvas")) {
      const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
      for (let i = 0; i < data.length; i += 4 * 7) {  // every seventh pixel is plenty
        if (data[i + 3] < 255) continue;
        const fill = hex(`rgb(${data[i]}, ${data[i + 1]}, ${data[i + 2]})`);
        if (fill === "#ffffff") continue;
        drawn.marks += 1;
        drawn.colors[fill] = (drawn.colors[fill] || 0) + 1;
      }
    }
    seen.push(drawn);
  }
  document.getElementById("seen").textContent = JSON.stringify(seen);
}
window.addEventListener("load", () => setTimeout(look, 2000));
"""


def page(outputs: Sequence[str], path: Path) -> Path:
    """A page holding each of ``outputs`` (SVG or HTML markup) as a notebook shows it."""
    body = "\n".join(f'<div class="output">{markup}</div>' for markup in outputs)
    path.write_text(
        '<!doctype html><html><head><meta charset="utf-8"></head><body style="margin:8px">\n'
        f'{body}\n<pre id="seen"></pre>\n<script>{_LOOK}</script></body></html>\n',
        encoding="utf-8",
    )
    return path


def look(path: Path, profile: Path, *, network: bool = False) -> list[dict[str, Any]]:
    """What Chromium drew of each output of the page at ``path`` (:func:`page`), with no
    network unless ``network``; ``profile`` is a fresh folder for the browser's profile."""
    assert CHROMIUM is not None, "Chromium is required here (SAFECONS_REQUIRE_CHROMIUM=1)"
    done = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            *(() if network else NO_NETWORK),
            f"--user-data-dir={profile}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="seen">(.*?)</pre>', done.stdout, re.S)
    assert found and found.group(1), f"the page never reported: {done.stdout[-2000:]}"
    return list(json.loads(html.unescape(found.group(1))))
