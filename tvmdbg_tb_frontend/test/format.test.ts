import { describe, expect, it } from "vitest";
import {
  defaultSlice,
  formatDuration,
  formatShape,
  formatValue,
  healthOf,
  healthText,
  isNonFinite,
  isUserFrame,
  orderFrames,
  parseIndex,
  pillSegments,
  sortRows,
  toNumber,
} from "../src/format";

describe("format", () => {
  it("decodes the backend's non-finite spellings", () => {
    expect(toNumber("NaN")).toBeNaN();
    expect(toNumber("Infinity")).toBe(Infinity);
    expect(toNumber("-Infinity")).toBe(-Infinity);
    expect(toNumber(2.5)).toBe(2.5);
    expect(toNumber(null)).toBeNaN();
  });

  it("reads FULL_HEALTH summaries into a pill in a fixed order", () => {
    const h = healthOf({ nan: 3, neg_inf: 0, pos_inf: 1, summary: { nan: 3, neg_inf: 0, pos_inf: 1, negative: 4, zero: 0, positive: 2, size: 10 } });
    expect(isNonFinite(h)).toBe(true);
    expect(pillSegments(h).map((s) => [s.kind, s.count])).toEqual([
      ["nan", 3],
      ["neg-inf", 0],
      ["pos-inf", 1],
      ["negative", 4],
      ["zero", 0],
      ["positive", 2],
    ]);
    expect(healthText(h)).toBe("NaN 3 · -∞ 0 · +∞ 1 · neg 4 · zero 0 · pos 2");
  });

  it("falls back to digest counts and marks CURT_HEALTH's unknown counts", () => {
    const h = healthOf({ nan: -1, neg_inf: -1, pos_inf: -1, summary: {} });
    expect(isNonFinite(h)).toBe(true);
    expect(pillSegments(h).length).toBe(3);
    expect(healthText(h)).toBe("NaN ? · -∞ ? · +∞ ?");
    expect(isNonFinite(healthOf({ nan: 0, neg_inf: 0, pos_inf: 0 }))).toBe(false);
  });

  it("formats durations, shapes and values", () => {
    expect(formatDuration(null)).toBe("—");
    expect(formatDuration(0.25)).toBe("250 ns");
    expect(formatDuration(3.14159)).toBe("3.14 µs");
    expect(formatDuration(1234)).toBe("1.23 ms");
    expect(formatDuration(2_500_000)).toBe("2.50 s");
    expect(formatShape([4, 8])).toBe("(4, 8)");
    expect(formatShape([7])).toBe("(7,)");
    expect(formatShape([])).toBe("()");
    expect(formatShape([-1, 64])).toBe("(?, 64)");
    expect(formatValue("NaN")).toBe("NaN");
    expect(formatValue("-Infinity")).toBe("-Inf");
    expect(formatValue(1e-7)).toBe("1.0000e-7");
    expect(formatValue(0.1 + 0.2)).toBe("0.3");
    expect(formatValue(42)).toBe("42");
  });

  it("puts the user's frames first, innermost first", () => {
    const frames = [
      { id: 1, file_path: "/home/u/train.py", file_index: 0, line: 90, function: "<module>" },
      { id: 2, file_path: "/home/u/model.py", file_index: 1, line: 12, function: "forward" },
      { id: 3, file_path: "/venv/lib/python3.11/site-packages/tvm/relax/block_builder.py", file_index: 2, line: 300, function: "emit" },
    ];
    expect(isUserFrame(frames[2])).toBe(false);
    expect(isUserFrame({ file_path: "<string>" })).toBe(false);
    expect(orderFrames(frames).map((r) => [r.frame.id, r.user, r.depth])).toEqual([
      [2, true, 1],
      [1, true, 0],
      [3, false, 2],
    ]);
  });

  it("sorts numbers numerically with NaN last, strings naturally, stably", () => {
    const rows = [
      { name: "lv10", t: 3 },
      { name: "lv2", t: NaN },
      { name: "lv1", t: 10 },
      { name: "lv3", t: 3 },
    ];
    expect(sortRows(rows, "t", true).map((r) => r.name)).toEqual(["lv1", "lv10", "lv3", "lv2"]);
    expect(sortRows(rows, "t", false).map((r) => r.name)).toEqual(["lv10", "lv3", "lv1", "lv2"]);
    expect(sortRows(rows, "name", false).map((r) => r.name)).toEqual(["lv1", "lv2", "lv3", "lv10"]);
  });

  it("parses 'go to index' input and rejects what is out of range", () => {
    expect(parseIndex("1,234,567", 2_000_000)).toBe(1_234_567);
    expect(parseIndex(" 0 ", 1)).toBe(0);
    expect(parseIndex("5", 5)).toBeNull();
    expect(parseIndex("-1", 5)).toBeNull();
    expect(parseIndex("abc", 5)).toBeNull();
    expect(parseIndex("", 5)).toBeNull();
  });

  it("chooses a default slice that leaves at most two dimensions", () => {
    expect(defaultSlice([3, 4])).toBe("");
    expect(defaultSlice([2, 3, 4, 5])).toBe("0,0");
  });
});
