import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  defaultSlice,
  formatDuration,
  formatLocation,
  formatShape,
  formatShapeExpr,
  formatValue,
  healthOf,
  healthText,
  isNonFinite,
  isUserFrame,
  orderFrames,
  parseIndex,
  pillSegments,
  sortRows,
  stepText,
  toNumber,
} from "../src/format";

describe("format", () => {
  it("shows the model's line, the user's call next to it, and an ONNX node where no line exists", () => {
    const lib = "/venv/lib/python3.11/site-packages/transformers/pytorch_utils.py";
    assert.equal(formatLocation({ file_path: "/home/u/run.py", line: 12, function: "main" }), "run.py:12");
    assert.equal(
      formatLocation({
        file_path: lib,
        line: 119,
        function: "forward",
        called_from: { file_path: "/home/u/run.py", line: 8, function: "main" },
        model_node: { format: "torch.fx", name: "addmm_3", op_type: "aten.addmm.default", model_file: "" },
      }),
      "pytorch_utils.py:119, called from run.py:8",
    );
    assert.equal(
      formatLocation({
        called_from: { file_path: "/home/u/run.py", line: 4, function: "<module>" },
        model_node: { format: "onnx", name: "/conv1/Conv", op_type: "Conv", model_file: "" },
      }),
      "ONNX node /conv1/Conv (Conv), called from run.py:4",
    );
    assert.equal(formatLocation(null), "no source location");
  });

  it("decodes the backend's non-finite spellings", () => {
    assert.ok(Number.isNaN(toNumber("NaN")));
    assert.equal(toNumber("Infinity"), Infinity);
    assert.equal(toNumber("-Infinity"), -Infinity);
    assert.equal(toNumber(2.5), 2.5);
    assert.ok(Number.isNaN(toNumber(null)));
  });

  it("reads FULL_HEALTH summaries into a pill in a fixed order", () => {
    const h = healthOf({
      nan: 3,
      neg_inf: 0,
      pos_inf: 1,
      summary: { nan: 3, neg_inf: 0, pos_inf: 1, negative: 4, zero: 0, positive: 2, size: 10 },
    });
    assert.equal(isNonFinite(h), true);
    assert.deepEqual(
      pillSegments(h).map((s) => [s.kind, s.count]),
      [
        ["nan", 3],
        ["neg-inf", 0],
        ["pos-inf", 1],
        ["negative", 4],
        ["zero", 0],
        ["positive", 2],
      ],
    );
    assert.equal(healthText(h), "NaN 3 · -∞ 0 · +∞ 1 · neg 4 · zero 0 · pos 2");
  });

  it("falls back to digest counts and marks CURT_HEALTH's unknown counts", () => {
    const h = healthOf({ nan: -1, neg_inf: -1, pos_inf: -1, summary: {} });
    assert.equal(isNonFinite(h), true);
    assert.equal(pillSegments(h).length, 3);
    assert.equal(healthText(h), "NaN ? · -∞ ? · +∞ ?");
    assert.equal(isNonFinite(healthOf({ nan: 0, neg_inf: 0, pos_inf: 0 })), false);
  });

  it("formats durations, shapes and values", () => {
    assert.equal(formatDuration(null), "—");
    assert.equal(formatDuration(0.25), "250 ns");
    assert.equal(formatDuration(3.14159), "3.14 µs");
    assert.equal(formatDuration(1234), "1.23 ms");
    assert.equal(formatDuration(2_500_000), "2.50 s");
    assert.equal(formatShape([4, 8]), "(4, 8)");
    assert.equal(formatShape([7]), "(7,)");
    assert.equal(formatShape([]), "()");
    assert.equal(formatShape([-1, 64]), "(?, 64)");
    assert.equal(formatValue("NaN"), "NaN");
    assert.equal(formatValue("-Infinity"), "-Inf");
    assert.equal(formatValue(1e-7), "1.0000e-7");
    assert.equal(formatValue(0.1 + 0.2), "0.3");
    assert.equal(formatValue(42), "42");
  });

  it("puts the user's frames first, innermost first", () => {
    const frames = [
      { id: 1, file_path: "/home/u/train.py", file_index: 0, line: 90, function: "<module>" },
      { id: 2, file_path: "/home/u/model.py", file_index: 1, line: 12, function: "forward" },
      { id: 3, file_path: "/venv/lib/python3.11/site-packages/tvm/relax/block_builder.py", file_index: 2, line: 300, function: "emit" },
    ];
    assert.equal(isUserFrame(frames[2]), false);
    assert.equal(isUserFrame({ file_path: "<string>" }), false);
    assert.deepEqual(
      orderFrames(frames).map((r) => [r.frame.id, r.user, r.depth]),
      [
        [2, true, 1],
        [1, true, 0],
        [3, false, 2],
      ],
    );
  });

  it("sorts numbers numerically with NaN last, strings naturally, stably", () => {
    const rows = [
      { name: "lv10", t: 3 },
      { name: "lv2", t: NaN },
      { name: "lv1", t: 10 },
      { name: "lv3", t: 3 },
    ];
    assert.deepEqual(
      sortRows(rows, "t", true).map((r) => r.name),
      ["lv1", "lv10", "lv3", "lv2"],
    );
    assert.deepEqual(
      sortRows(rows, "t", false).map((r) => r.name),
      ["lv10", "lv3", "lv1", "lv2"],
    );
    assert.deepEqual(
      sortRows(rows, "name", false).map((r) => r.name),
      ["lv1", "lv2", "lv3", "lv10"],
    );
  });

  it("parses 'go to index' input and rejects what is out of range", () => {
    assert.equal(parseIndex("1,234,567", 2_000_000), 1_234_567);
    assert.equal(parseIndex(" 0 ", 1), 0);
    assert.equal(parseIndex("5", 5), null);
    assert.equal(parseIndex("-1", 5), null);
    assert.equal(parseIndex("abc", 5), null);
    assert.equal(parseIndex("", 5), null);
  });

  it("chooses a default slice that leaves at most two dimensions", () => {
    assert.equal(defaultSlice([3, 4]), "");
    assert.equal(defaultSlice([2, 3, 4, 5]), "0,0");
  });
});

describe("formatShapeExpr", () => {
  it("shows integer wrappers as their value and keeps symbols", () => {
    assert.equal(formatShapeExpr('R.Tensor((T.int64(1437), 10), dtype="float32")'), 'R.Tensor((1437, 10), dtype="float32")');
    assert.equal(formatShapeExpr("(n, T.int32(-1))"), "(n, -1)");
    assert.equal(formatShapeExpr("(4, 8)"), "(4, 8)");
  });
});

describe("stepText", () => {
  it("names a call by its function and its VM's step, as the CLI does", () => {
    assert.equal(stepText("decode", 14), "decode · step 14");
    assert.equal(stepText("decode", 0), "decode"); // a dump without steps
    assert.equal(stepText("embed", 5, 2, 2), "embed · step 5 · VM 2");
    assert.equal(stepText("embed", 5, 1, 1), "embed · step 5");
  });
});
