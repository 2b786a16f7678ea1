import { describe, expect, it } from "vitest";
import { ScrollMap } from "../src/scrollmap";

describe("ScrollMap", () => {
  it("maps one pixel to one pixel for short lists", () => {
    const m = new ScrollMap(100, 20, 200, 1_000_000);
    expect(m.scaled).toBe(false);
    expect(m.spacerHeight).toBe(2000);
    expect(m.window(0)).toEqual({ first: 0, end: 12, offsetPx: 0 });
    const w = m.window(210);
    expect(w.first).toBe(10);
    expect(w.offsetPx).toBe(-10);
    expect(m.scrollTopFor(50)).toBe(1000);
  });

  it("never makes the spacer taller than the limit, however many rows", () => {
    const rows = 50_000_000; // 1.3e9 px at 26 px a row, far past any browser's limit
    const m = new ScrollMap(rows, 26, 600, 4_000_000);
    expect(m.scaled).toBe(true);
    expect(m.spacerHeight).toBe(4_000_000);
    expect(m.window(0).first).toBe(0);
    const bottom = m.window(m.spacerHeight - 600);
    expect(bottom.end).toBe(rows); // the last row is reachable
    expect(bottom.first).toBeGreaterThan(rows - 30);
  });

  it("round-trips every row through scrollTopFor and window, scaled or not", () => {
    for (const rows of [10, 1000, 1_500_000, 12_345_678]) {
      const m = new ScrollMap(rows, 26, 520, 4_000_000);
      for (const row of [0, 1, Math.floor(rows / 3), Math.floor(rows / 2), rows - 21, rows - 1]) {
        if (row < 0) continue;
        const top = m.scrollTopFor(row);
        const w = m.window(top);
        expect(row).toBeGreaterThanOrEqual(w.first);
        expect(row).toBeLessThan(w.end);
      }
    }
  });

  it("centres a row and reports whether it is fully visible", () => {
    const m = new ScrollMap(1_000_000, 26, 520, 4_000_000);
    const top = m.scrollTopFor(500_000, "center");
    expect(m.isFullyVisible(500_000, top)).toBe(true);
    expect(m.isFullyVisible(400_000, top)).toBe(false);
    const w = m.window(top);
    const rowTop = w.offsetPx + (500_000 - w.first) * 26;
    expect(Math.abs(rowTop - (520 - 26) / 2)).toBeLessThan(26);
  });

  it("is monotonic: scrolling down never shows an earlier row", () => {
    const m = new ScrollMap(3_000_000, 26, 700, 4_000_000);
    let last = -1;
    for (let s = 0; s <= m.spacerHeight; s += 9973) {
      const { first } = m.window(s);
      expect(first).toBeGreaterThanOrEqual(last);
      last = first;
    }
  });

  it("handles empty lists and clamps out-of-range positions", () => {
    const m = new ScrollMap(0, 26, 500);
    expect(m.window(100)).toEqual({ first: 0, end: 0, offsetPx: 0 });
    const n = new ScrollMap(5, 26, 500);
    expect(n.window(-50).first).toBe(0);
    expect(n.scrollTopFor(99)).toBe(0); // everything fits: nothing to scroll
    expect(() => new ScrollMap(5, 0, 500)).toThrow();
  });
});

describe("ScrollMap across a resize", () => {
  it("keeps the same content in view when the viewport shrinks at scale", () => {
    const before = new ScrollMap(1_600_000, 26, 358, 4_000_000);
    const scrollTop = before.scrollTopFor(1_599_989, "center");
    const top = before.contentTopFor(scrollTop);
    const after = new ScrollMap(1_600_000, 26, 316, 4_000_000);
    const restored = after.scrollTopForContent(top);
    expect(Math.abs(after.contentTopFor(restored) - top)).toBeLessThan(1e-3);
    // without the restore, the same scrollTop would show rows far away
    expect(Math.abs(after.contentTopFor(scrollTop) - top)).toBeGreaterThan(100);
  });
});
