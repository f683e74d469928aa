"""`browser_vision`: a screenshot of the task's page (with numbered labels on its interactive elements
when `annotate`, each [N] the element @eN of the snapshot), kept in the prompt's sandbox and sent with the
model's question to the vision model through the run's model client, as `vision_analyze` does."""

from __future__ import annotations

import re
from typing import Any

_REFS = re.compile(r"\[ref=(e\d+)\]")  # main-frame elements (a frame's refs, f1e2, are not labelled)
MAX_LABELS = 200
SHOTS_DIR = ".browser"
_LABEL_JS = """(boxes) => {
  const layer = document.createElement('div');
  layer.id = '__hx_labels';
  layer.style.cssText = 'position:fixed;inset:0;pointer-events:none;z-index:2147483647';
  for (const b of boxes) {
    const tag = document.createElement('div');
    tag.textContent = '[' + b.n + ']';
    tag.style.cssText = `position:fixed;left:${b.x}px;top:${b.y}px;background:#ffd400;color:#000;` +
      'font:bold 11px monospace;padding:0 2px;border:1px solid #000';
    layer.appendChild(tag);
  }
  document.documentElement.appendChild(layer);
}"""
_UNLABEL_JS = "() => document.getElementById('__hx_labels')?.remove()"


async def screenshot(page: Any, snapshot: str, annotate: bool, timeout_ms: float) -> bytes:
    """The visible part of the page as PNG; labelled from `snapshot`'s refs when `annotate`."""
    if not annotate:
        return await page.screenshot(type="png", timeout=timeout_ms)
    boxes = []
    for ref in list(dict.fromkeys(_REFS.findall(snapshot)))[:MAX_LABELS]:
        try:
            box = await page.locator(f"aria-ref={ref}").bounding_box(timeout=1000)
        except Exception:  # noqa: BLE001 - an element gone since the snapshot: no label for it
            box = None
        if box:
            boxes.append({"n": ref[1:], "x": round(box["x"]), "y": round(box["y"])})
    await page.evaluate(_LABEL_JS, boxes)
    try:
        return await page.screenshot(type="png", timeout=timeout_ms)
    finally:
        await page.evaluate(_UNLABEL_JS)


def see(vision: Any, ctx: Any, result: dict[str, Any], question: str) -> dict[str, Any]:
    """Keep the screenshot in the sandbox (`.browser/screenshot-N.png`) and ask the vision model."""
    png = result.pop("png")
    count = ctx.task.get("browser-shots", lambda: [0])
    count[0] += 1
    path = f"{SHOTS_DIR}/screenshot-{count[0]}.png"
    ctx.sandbox.write_file(path, png)
    answer = vision.analyze(ctx, question, png, path, tool="browser_vision")
    return {**result, "analysis": answer["analysis"], "screenshot_path": path, "error": None}
