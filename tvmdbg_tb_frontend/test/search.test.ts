import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Op } from "../src/api";
import { opLocations, searchOps } from "../src/search";

function op(id: number, name: string, kernel: string, types: [string, number][], line: number | null = null): Op {
  const loc = (l: number) => ({ file_path: "/home/u/model.py", line: l, function: "forward" });
  return {
    op_id: id,
    graph_id: 0,
    op_name: name,
    kernel,
    call_type: "call_tir",
    position: id,
    device: "cpu",
    location: line === null ? null : loc(line),
    stack_frame_ids: [],
    original_ops: types.map(([t, l], k) => ({ op_type: t, var_name: `lv${id}_${k}`, location: loc(l) })),
    outputs: [],
  };
}

const OPS = [
  op(0, "lv", "subtract", [["relax.subtract", 10]], 10),
  op(1, "lv1", "fused_log_multiply", [
    ["relax.log", 11],
    ["relax.multiply", 12],
  ]),
  op(2, "lv12", "matmul", [["relax.matmul", 13]], 13),
  op(3, "gv", "add", [["relax.add", 14]], 14),
];

describe("searchOps", () => {
  it("ranks an exact name before a name prefix", () => {
    assert.deepEqual(
      searchOps(OPS, "lv1").map((m) => m.op.op_name),
      ["lv1", "lv12"],
    );
  });

  it("finds a fused kernel by a Relax op folded into it, with or without relax.", () => {
    for (const q of ["relax.log", "log", "LOG"]) {
      const [m] = searchOps(OPS, q);
      assert.equal(m.op.op_id, 1, q);
      assert.match(m.why, /op type relax\.log/);
    }
  });

  it("finds ops by the source line that created them", () => {
    assert.deepEqual(
      searchOps(OPS, "model.py:12").map((m) => m.op.op_id),
      [1],
    );
    assert.deepEqual(
      searchOps(OPS, ":13").map((m) => m.op.op_id),
      [2],
    );
    assert.equal(searchOps(OPS, "other.py:13").length, 0);
  });

  it("finds a kernel by its symbol and answers nothing for an empty query", () => {
    assert.equal(searchOps(OPS, "matmul")[0].op.op_id, 2);
    assert.deepEqual(searchOps(OPS, "  "), []);
    assert.equal(searchOps(OPS, "lv", 2).length, 2);
  });

  it("lists an op's own line and its fused ops' lines once each", () => {
    const locs = opLocations(
      op(
        9,
        "x",
        "k",
        [
          ["relax.add", 5],
          ["relax.add", 5],
          ["relax.exp", 6],
        ],
        5,
      ),
    );
    assert.deepEqual(
      locs.map((l) => l.line),
      [5, 6],
    );
  });

  it("finds an op by the imported model's node, also one without a line (ONNX)", () => {
    const onnx = op(7, "lv7", "conv2d", []);
    onnx.location = { model_node: { format: "onnx", name: "/layer1/conv/Conv", op_type: "Conv", model_file: "m.onnx" } };
    const [m] = searchOps([...OPS, onnx], "/layer1/conv/Conv");
    assert.equal(m.op.op_id, 7);
    assert.match(m.why, /node \/layer1\/conv\/Conv/);
    assert.equal(searchOps([...OPS, onnx], "layer1/conv")[0].op.op_id, 7);
    assert.deepEqual(opLocations(onnx), []);
  });
});
