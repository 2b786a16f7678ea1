"""What a user sees of the dashboard, measured in the page: whether an element is inside the
window and inside every box that scrolls it, whether panels overlap, whether the page itself
scrolls, the smallest text on screen, and whether the page still answers. Shared by the
browser tests (tests/test_dashboard_*.py)."""

from __future__ import annotations

import time

# Where `el` is, seen through every ancestor that clips it: "ok", or what hides it. The
# vertical extent must be inside; sideways, the whole element when `full` (a graph node),
# else its start (a source line longer than its box).
IN_VIEW = """([el, full]) => {
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.height === 0) return "not rendered";
  const across = (a, b) => full ? (r.left >= a - 1 && r.right <= b + 1) : (r.left >= a - 1 && r.left < b);
  for (let p = el.parentElement; p; p = p.parentElement) {
    const s = getComputedStyle(p);
    if (!/(auto|scroll|hidden|clip)/.test(s.overflowX + s.overflowY)) continue;
    const q = p.getBoundingClientRect();
    if (r.top < q.top - 1 || r.bottom > q.bottom + 1 || !across(q.left, q.right)) {
      // Where both are, and how the box's scroller is scrolled: enough to tell a scroll the
      // page never made from a box too small for the element.
      let sc = p;
      while (sc && sc.scrollHeight <= sc.clientHeight && sc.scrollWidth <= sc.clientWidth) sc = sc.parentElement;
      const at = (b) => `x ${Math.round(b.left)}-${Math.round(b.right)} y ${Math.round(b.top)}-${Math.round(b.bottom)}`;
      const scrolled = sc ? `; scrollTop ${Math.round(sc.scrollTop)} of ${sc.scrollHeight} in ${sc.clientHeight}` : "";
      return `hidden by ${p.tagName}.${String(p.className.baseVal ?? p.className).split(" ").join(".")}` +
        ` (element ${at(r)}, box ${at(q)}${scrolled})`;
    }
  }
  if (r.top < -1 || r.bottom > innerHeight + 1 || !across(0, innerWidth)) return "outside the window";
  return "ok";
}"""

# Leaf panes of the layout that overlap (by more than a pixel), and any pane outside the window.
OVERLAPS = """() => {
  const panes = [...document.querySelectorAll(".layout .pane")].filter(
    (p) => !p.classList.contains("split") && p.getClientRects().length);
  const boxes = panes.map((p) => [p.dataset.panel ?? p.className, p.getBoundingClientRect()]);
  const out = [];
  for (let i = 0; i < boxes.length; i++) {
    const [a, r] = boxes[i];
    if (r.left < -1 || r.top < -1 || r.right > innerWidth + 1 || r.bottom > innerHeight + 1)
      out.push(`${a} outside the window`);
    for (let j = i + 1; j < boxes.length; j++) {
      const [b, q] = boxes[j];
      const w = Math.min(r.right, q.right) - Math.max(r.left, q.left);
      const h = Math.min(r.bottom, q.bottom) - Math.max(r.top, q.top);
      if (w > 1 && h > 1) out.push(`${a} overlaps ${b} (${Math.round(w)}x${Math.round(h)} px)`);
    }
  }
  const doc = document.scrollingElement;
  if (doc.scrollHeight > innerHeight + 1 || doc.scrollWidth > innerWidth + 1)
    out.push(`the page scrolls (${doc.scrollWidth}x${doc.scrollHeight} in ${innerWidth}x${innerHeight})`);
  return { panes: boxes.length, problems: out };
}"""

# Every piece of text on screen smaller than `min` px: its CSS font size, times the drawing's
# scale for SVG text (a graph node at the zoom it is shown at).
SMALL_TEXT = """(min) => {
  const bad = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let seen = 0;
  while (walker.nextNode()) {
    const t = walker.currentNode;
    const el = t.parentElement;
    if (!el || !t.textContent.trim() || !el.getClientRects().length) continue;
    if (el.closest("title, option, optgroup, style, script")) continue;
    const s = getComputedStyle(el);
    if (s.visibility === "hidden" || s.display === "none") continue;
    const r = el.getBoundingClientRect();
    if (r.bottom < 0 || r.top > innerHeight || r.right < 0 || r.left > innerWidth) continue;
    let size = parseFloat(s.fontSize);
    if (el instanceof SVGElement && el.ownerSVGElement) size *= el.ownerSVGElement.getScreenCTM().a;
    seen += 1;
    if (size < min - 0.05)
      bad.push(`${el.tagName}.${String(el.className.baseVal ?? el.className)} "${t.textContent.trim().slice(0, 24)}" ${size.toFixed(1)}px`);
  }
  return { seen, bad };
}"""


def inner_frame(browser):
    """The dashboard's own frame (for evaluate), once its page is open."""
    return next(f for f in browser.page.frames if "plugin_entry.html" in f.url)


def in_view(locator, full: bool = True) -> str:
    return locator.evaluate(f"(el) => ({IN_VIEW})([el, {str(full).lower()}])")


def assert_in_view(locator, full: bool = True, timeout: float = 10.0) -> None:
    """The element is on screen: inside the window and every box that clips it (it may take
    a moment: panels scroll to a selection after it loads)."""
    locator.wait_for(timeout=timeout * 1000)
    deadline = time.time() + timeout
    where = in_view(locator, full)
    while where != "ok" and time.time() < deadline:
        time.sleep(0.2)
        where = in_view(locator, full)
    assert where == "ok", where


def assert_layout_sound(browser) -> int:
    """No pane overlaps another, none leaves the window, the page never scrolls; the number of
    panes seen."""
    result = inner_frame(browser).evaluate(OVERLAPS)
    assert result["problems"] == [], result["problems"]
    outer = browser.page.locator('iframe[src*="plugin_entry.html?name=tvmdbg"]').bounding_box()
    viewport = browser.page.viewport_size
    assert outer["y"] + outer["height"] <= viewport["height"] + 1, (outer, viewport)
    return result["panes"]


def assert_text_legible(browser, minimum: float = 11.0) -> int:
    """Every text on screen is at least `minimum` px (computed styles, SVG scale included);
    the number of texts checked."""
    result = inner_frame(browser).evaluate(SMALL_TEXT, minimum)
    assert result["bad"] == [], result["bad"][:20]
    return result["seen"]


# Long enough that only a frozen page misses it on a loaded machine: how fast the page answers
# is measured in bench/, never asserted here.
FROZEN_S = 60.0


def assert_answers(browser) -> float:
    """The page's script answers (a frozen page times out); the time it took, for the record."""
    start = time.time()
    inner_frame(browser).wait_for_function("() => true", timeout=FROZEN_S * 1000)
    return time.time() - start


# How many of the items matching `sel` are wholly inside the box of `box` (rows a user sees
# without scrolling).
ROWS_IN_VIEW = """([sel, box]) => {
  const b = document.querySelector(box)?.getBoundingClientRect();
  if (!b) return 0;
  return [...document.querySelectorAll(sel)].filter((el) => {
    const r = el.getBoundingClientRect();
    return r.height > 0 && r.top >= b.top - 1 && r.bottom <= b.bottom + 1;
  }).length;
}"""


def rows_in_view(browser, selector: str, box: str) -> int:
    """Items matching selector wholly inside the box `box` (e.g. source lines in the source panel)."""
    return inner_frame(browser).evaluate(ROWS_IN_VIEW, [selector, box])


FOCUSED = """() => {
  const a = document.activeElement;
  if (!a || a === document.body) return null;
  const cls = String(a.className.baseVal ?? a.className);
  const ring = a instanceof SVGElement
    ? getComputedStyle(a.querySelector("rect")).strokeDasharray
    : getComputedStyle(a).outlineStyle + " " + getComputedStyle(a).outlineWidth;
  return { cls, text: a.textContent.trim().slice(0, 60), opName: a.dataset.opName ?? null,
           panel: a.closest("[data-panel]")?.dataset.panel ?? null, ring };
}"""


def focused(browser) -> dict | None:
    """What has the keyboard focus in the dashboard: its class, text, op name (graph nodes,
    rows), the panel it is in, and its focus ring (outline, or an SVG node's dashed box)."""
    return inner_frame(browser).evaluate(FOCUSED)
