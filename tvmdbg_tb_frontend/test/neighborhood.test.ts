import { describe, expect, it } from "vitest";
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
});

describe("neighborhood", () => {
  const chain = Array.from({ length: 10_000 }, (_, i) => edge(i, i + 1)); // 10001 ops in a line

  it("walks both ways from the centre, nearest first, within depth", () => {
    const n = neighborhood(5000, chain, 2, 100);
    expect(n.ops).toEqual([5000, 4999, 5001, 4998, 5002]);
    expect([...n.frontier].sort()).toEqual([4998, 5002]);
  });

  it("caps the number of ops however large the graph", () => {
    const star = Array.from({ length: 5000 }, (_, i) => edge(0, i + 1));
    const n = neighborhood(0, star, 3, 40);
    expect(n.ops.length).toBe(40);
    expect(n.ops[0]).toBe(0);
    expect(n.frontier.has(0)).toBe(true);
  });

  it("ignores edges from parameters and shows a whole small graph without frontier", () => {
    const n = neighborhood(1, [edge(null, 0), edge(0, 1), edge(1, 2)], 5, 50);
    expect(n.ops.sort()).toEqual([0, 1, 2]);
    expect(n.frontier.size).toBe(0);
  });
});
