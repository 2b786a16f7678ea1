import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Edge } from "../src/api";
import { neighborhood } from "../src/neighborhood";

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

describe("neighborhood", () => {
  const chain = Array.from({ length: 10_000 }, (_, i) => edge(i, i + 1)); // 10001 ops in a line

  it("walks both ways from the centre, nearest first, within depth", () => {
    const n = neighborhood(5000, chain, 2, 100);
    assert.deepEqual(n.ops, [5000, 4999, 5001, 4998, 5002]);
    assert.deepEqual([...n.frontier].sort(), [4998, 5002]);
  });

  it("caps the number of ops however large the graph", () => {
    const star = Array.from({ length: 5000 }, (_, i) => edge(0, i + 1));
    const n = neighborhood(0, star, 3, 40);
    assert.equal(n.ops.length, 40);
    assert.equal(n.ops[0], 0);
    assert.equal(n.frontier.has(0), true);
  });

  it("ignores edges from parameters and shows a whole small graph without frontier", () => {
    const n = neighborhood(1, [edge(null, 0), edge(0, 1), edge(1, 2)], 5, 50);
    assert.deepEqual(n.ops.sort(), [0, 1, 2]);
    assert.equal(n.frontier.size, 0);
  });
});
