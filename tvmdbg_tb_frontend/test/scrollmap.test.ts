import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ScrollMap } from "../src/scrollmap";

describe("ScrollMap", () => {
  it("maps one pixel to one pixel for short lists", () => {
    const m = new ScrollMap(100, 20, 200, 1_000_000);
    assert.equal(m.scaled, false);
    assert.equal(m.spacerHeight, 2000);
    assert.deepEqual(m.window(0), { first: 0, end: 12, offsetPx: 0 });
    const w = m.window(210);
    assert.equal(w.first, 10);
    assert.equal(w.offsetPx, -10);
    assert.equal(m.scrollTopFor(50), 1000);
  });

  it("never makes the spacer taller than the limit, however many rows", () => {
    const rows = 50_000_000; // 1.3e9 px at 26 px a row, far past any browser's limit
    const m = new ScrollMap(rows, 26, 600, 4_000_000);
    assert.equal(m.scaled, true);
    assert.equal(m.spacerHeight, 4_000_000);
    assert.equal(m.window(0).first, 0);
    const bottom = m.window(m.spacerHeight - 600);
    assert.equal(bottom.end, rows); // the last row is reachable
    assert.ok(bottom.first > rows - 30);
  });

  it("round-trips every row through scrollTopFor and window, scaled or not", () => {
    for (const rows of [10, 1000, 1_500_000, 12_345_678]) {
      const m = new ScrollMap(rows, 26, 520, 4_000_000);
      for (const row of [0, 1, Math.floor(rows / 3), Math.floor(rows / 2), rows - 21, rows - 1]) {
        if (row < 0) continue;
        const top = m.scrollTopFor(row);
        const w = m.window(top);
        assert.ok(row >= w.first);
        assert.ok(row < w.end);
      }
    }
  });

  it("centres a row and reports whether it is fully visible", () => {
    const m = new ScrollMap(1_000_000, 26, 520, 4_000_000);
    const top = m.scrollTopFor(500_000, "center");
    assert.equal(m.isFullyVisible(500_000, top), true);
    assert.equal(m.isFullyVisible(400_000, top), false);
    const w = m.window(top);
    const rowTop = w.offsetPx + (500_000 - w.first) * 26;
    assert.ok(Math.abs(rowTop - (520 - 26) / 2) < 26);
  });

  it("is monotonic: scrolling down never shows an earlier row", () => {
    const m = new ScrollMap(3_000_000, 26, 700, 4_000_000);
    let last = -1;
    for (let s = 0; s <= m.spacerHeight; s += 9973) {
      const { first } = m.window(s);
      assert.ok(first >= last);
      last = first;
    }
  });

  it("handles empty lists and clamps out-of-range positions", () => {
    const m = new ScrollMap(0, 26, 500);
    assert.deepEqual(m.window(100), { first: 0, end: 0, offsetPx: 0 });
    const n = new ScrollMap(5, 26, 500);
    assert.equal(n.window(-50).first, 0);
    assert.equal(n.scrollTopFor(99), 0); // everything fits: nothing to scroll
    assert.throws(() => new ScrollMap(5, 0, 500));
  });
});

describe("ScrollMap across a resize", () => {
  it("keeps the same content in view when the viewport shrinks at scale", () => {
    const before = new ScrollMap(1_600_000, 26, 358, 4_000_000);
    const scrollTop = before.scrollTopFor(1_599_989, "center");
    const top = before.contentTopFor(scrollTop);
    const after = new ScrollMap(1_600_000, 26, 316, 4_000_000);
    const restored = after.scrollTopForContent(top);
    assert.ok(Math.abs(after.contentTopFor(restored) - top) < 1e-3);
    // without the restore, the same scrollTop would show rows far away
    assert.ok(Math.abs(after.contentTopFor(scrollTop) - top) > 100);
  });
});
