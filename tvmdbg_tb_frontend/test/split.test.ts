import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { GUTTER_PX, clampFraction } from "../src/split";

describe("clampFraction", () => {
  it("keeps both panes at their minimum sizes", () => {
    const total = 1000 + GUTTER_PX;
    assert.equal(clampFraction(0.5, total, 200, 300), 0.5);
    assert.equal(clampFraction(0.05, total, 200, 300), 0.2); // first pane >= 200 px
    assert.equal(clampFraction(0.95, total, 200, 300), 0.7); // second pane >= 300 px
  });

  it("shares a split too small for both minimums in their proportion", () => {
    assert.equal(clampFraction(0.9, 300 + GUTTER_PX, 200, 200), 0.5);
    assert.equal(clampFraction(0.1, 100 + GUTTER_PX, 300, 100), 0.75);
  });

  it("refuses nonsense (a corrupt stored size) without throwing", () => {
    assert.equal(clampFraction(NaN, 1000, 10, 10), 0.5);
    assert.equal(clampFraction(Infinity, 1000, 10, 10), 0.5);
    assert.ok(clampFraction(-3, 1000, 10, 10) >= 10 / (1000 - GUTTER_PX));
  });
});
