"""Render an HTML report in headless Chromium: a screenshot plus in-page checks.

The page is copied with a script appended that, once everything has loaded, records every image
that failed to load and every element cut off (wider than the page, or content hidden by its own
overflow), into a ``<pre id="probekit-render-check">`` JSON block; ``--dump-dom`` prints the DOM
after load, so no browser-driver package is needed. Debian: ``apt-get install chromium``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import warnings
from pathlib import Path

#: Screenshots taller than this are cut to it: a full-page capture of a long report needs a
#: surface of width x height x 4 bytes, which in a container with a small /dev/shm made headless
#: Chromium hang (CI, 1280 x 8924 px). The in-page check still covers the whole page.
MAX_SCREENSHOT_HEIGHT = 4000

CHECK_SCRIPT = """
<script>
window.addEventListener("load", () => {
  const width = document.documentElement.clientWidth;
  const describe = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") +
      (e.alt ? "[alt=" + e.alt + "]" : "") + ": " + (e.textContent || "").trim().slice(0, 60);
  const broken = [...document.images]
      .filter((i) => !i.complete || i.naturalWidth === 0).map(describe);
  const clipped = [];
  if (document.documentElement.scrollWidth > width + 1)
    clipped.push("the page is wider than the window (" + document.documentElement.scrollWidth +
                 " > " + width + " px)");
  for (const e of document.body.querySelectorAll("*")) {
    if (e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1 && e.id !== "probekit-render-check")
      clipped.push("content wider than its box: " + describe(e));
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > width + 1) clipped.push("past the page edge: " + describe(e));
    const style = getComputedStyle(e);
    if (style.overflowX !== "visible" && e.scrollWidth > e.clientWidth + 1)
      clipped.push("hidden by overflow-x: " + describe(e));
    if (style.overflowY !== "visible" && e.scrollHeight > e.clientHeight + 1)
      clipped.push("hidden by overflow-y: " + describe(e));
  }
  const tops = {}, bottoms = {};
  for (const id of __IDS__) {
    const e = document.getElementById(id);
    tops[id] = e ? e.getBoundingClientRect().top + window.scrollY : null;
    bottoms[id] = e ? e.getBoundingClientRect().bottom + window.scrollY : null;
  }
  const out = document.createElement("pre");
  out.id = "probekit-render-check";
  const svgs = document.querySelectorAll("svg").length;
  out.textContent = JSON.stringify({images: document.images.length, svgs, broken, clipped, tops,
                                    bottoms, height: document.documentElement.scrollHeight});
  out.style.display = "none";
  document.body.appendChild(out);
});
</script>
"""


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome binary, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(binary: str, args: list[str], timeout: float = 180) -> str:
    # --disable-dev-shm-usage: write shared memory to /tmp, not a container's small /dev/shm.
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--hide-scrollbars", "--virtual-time-budget=10000",
             "--run-all-compositor-stages-before-draw"]
    res = subprocess.run([binary, *flags, *args], capture_output=True, text=True,
                         timeout=timeout, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"chromium failed ({res.returncode}): {res.stderr[-2000:]}")
    return res.stdout


def render_report(html: Path, screenshot: Path | None, *, width: int = 1280,
                  ids: tuple[str, ...] = ()) -> dict:
    """Check ``html`` in Chromium at ``width`` px and save a full-page screenshot.

    ``ids``: elements whose page position to record: ``result["tops"][id]`` is the distance in
    px from the top of the page to the element's top (``getBoundingClientRect().top`` plus the
    scroll offset), ``result["bottoms"][id]`` to its bottom, None when the page has no such
    element.

    The in-page check (``--dump-dom``) must finish; the screenshot is an artifact for a person
    to look at, cut to :data:`MAX_SCREENSHOT_HEIGHT` px, and a screenshot that times out is a
    warning, not a failure (``"screenshot": None``); ``screenshot=None`` takes none (the
    layout check alone, e.g. the page height).

    Returns:
        ``{"images": n, "svgs": n, "broken": [...], "clipped": [...], "tops": {id: px},
        "bottoms": {id: px}, "height": px, "screenshot": path}``.
    """
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium binary on PATH")
    probe = html.with_name(html.stem + ".render-check.html")
    text = html.read_text()
    script = CHECK_SCRIPT.replace("__IDS__", json.dumps(list(ids)))
    probe.write_text(text.replace("</body>", script + "</body>"))
    try:
        dom = _run(binary, [f"--window-size={width},1000", "--dump-dom", probe.as_uri()])
        found = re.search(r'<pre id="probekit-render-check"[^>]*>(.*?)</pre>', dom, re.S)
        if found is None:
            raise RuntimeError("the check script did not run (no result in the DOM)")
        result = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")
                            .replace("&lt;", "<").replace("&gt;", ">"))
        height = min(int(result["height"]) + 20, MAX_SCREENSHOT_HEIGHT)
        if screenshot is None:
            result["screenshot"] = None
            return result
        try:
            _run(binary, [f"--window-size={width},{height}", f"--screenshot={screenshot}",
                          html.as_uri()], timeout=120)
            result["screenshot"] = str(screenshot)
        except subprocess.TimeoutExpired:
            warnings.warn(f"chromium: the {width}x{height} screenshot of {html} timed out "
                          "after 120 s; the in-page check passed", stacklevel=2)
            result["screenshot"] = None
    finally:
        probe.unlink(missing_ok=True)
    return result


def first_screen(html: Path, screenshot: Path, *, width: int = 1440, height: int = 900) -> Path:
    """Save what a reader sees first: ``html`` at ``width`` x ``height`` px, no scrolling."""
    binary = find_chromium()
    if binary is None:
        raise FileNotFoundError("no chromium binary on PATH")
    _run(binary, [f"--window-size={width},{height}", f"--screenshot={screenshot}", html.as_uri()],
         timeout=120)
    return screenshot
