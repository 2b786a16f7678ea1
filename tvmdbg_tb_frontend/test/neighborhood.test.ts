import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Edge } from "../src/api";
import { everything, type HoodAnswer, nearer } from "../src/neighborhood";

const edge = (src: number | null, dst: number): Edge => ({
  src_op_id: src,
  src_output_slot: 0,
  dst_op_id: dst,
  dst_input_slot: 0,
  kind: src === null ? "PARAM" : "OP_OUTPUT",
  name: "",
  param_index: src === null ? 0 : null,
  tuple_item: null,
});

/** A chain 0 -> 1 -> ... -> 10 answered around op 5 with depth 3 (as graphs/neighborhood does). */
const chain: HoodAnswer = {
  ops: [5, 4, 6, 3, 7, 2, 8].map((op_id) => ({ op_id, distance: Math.abs(op_id - 5) })),
  edges: [edge(null, 2), ...[2, 3, 4, 5, 6, 7].map((i) => edge(i, i + 1)), edge(1, 2)],
  frontier: [2, 8],
};

describe("nearer", () => {
  it("keeps the ops within a depth, nearest first, with the ops cut off as frontier", () => {
    const n = nearer(chain, 1, 100);
    assert.deepEqual(n.ops, [5, 4, 6]);
    assert.deepEqual([...n.frontier].sort(), [4, 6]);
  });

  it("caps the number of ops, keeping the nearest", () => {
    const n = nearer(chain, 3, 4);
    assert.deepEqual(n.ops, [5, 4, 6, 3]);
    assert.deepEqual([...n.frontier].sort(), [3, 6]);
  });

  it("keeps the answer's own frontier for the ops it keeps", () => {
    const n = nearer(chain, 3, 100);
    assert.deepEqual([...n.frontier].sort(), [2, 8]);
    assert.deepEqual(everything(chain).ops.length, 7);
  });

  it("leaves out ops the answer gave no distance (unconnected ops of a whole graph)", () => {
    const whole: HoodAnswer = { ops: [...chain.ops, { op_id: 99, distance: null }], edges: chain.edges, frontier: [] };
    assert.equal(nearer(whole, 10, 100).ops.includes(99), false);
    assert.equal(everything(whole).ops.includes(99), true);
  });
});
