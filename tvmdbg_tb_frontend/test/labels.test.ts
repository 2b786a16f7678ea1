import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { RunInfo } from "../src/api";
import { plural } from "../src/format";
import { defaultPair } from "../src/panels/compare";
import { runLabel, runLabels } from "../src/panels/header";
import { alertCallText, originWords } from "../src/panels/alerts";
import { originalNames } from "../src/panels/inner_ops";

function run(name: string, extra: Partial<RunInfo> = {}): RunInfo {
  return {
    run: name,
    argv: ["/home/u/train.py", "--lr", "0.1"],
    tensor_debug_mode: "FULL_HEALTH",
    num_alerts: 0,
    start_time: 1_700_000_000,
    live: false,
    ...extra,
  } as RunInfo;
}

describe("run labels", () => {
  it("starts with the user's run name, then the command, mode and alerts", () => {
    const label = runLabel(run("a", { run_name: "baseline", num_alerts: 1 }));
    assert.match(label, /^baseline · train\.py --lr 0\.1 · FULL_HEALTH · 1 alert · /);
  });

  it("names the directory only where two labels would be equal", () => {
    const labels = runLabels([run("x/1"), run("x/2"), run("y", { run_name: "fixed" })]);
    assert.ok(labels[0].endsWith(" · x/1") && labels[1].endsWith(" · x/2"));
    assert.ok(!labels[2].includes(" · y"));
    assert.equal(new Set(labels).size, 3);
  });
});

describe("Compare's default runs", () => {
  it("compares the run being looked at with the PyTorch reference, never the reverse", () => {
    const runs = [run("ref", { reference: true, argv: ["/u/export.py"] }), run("tvm"), run("other", { argv: ["/u/x.py"] })];
    assert.deepEqual(defaultPair(runs, "tvm"), ["tvm", "ref"]);
    assert.deepEqual(defaultPair(runs, "ref"), ["other", "ref"]); // a reference is never A
  });

  it("without a reference, pairs runs of the same script", () => {
    const runs = [run("a1"), run("b", { argv: ["/u/other.py"] }), run("a2")];
    assert.deepEqual(defaultPair(runs, "a2"), ["a2", "a1"]);
  });
});

describe("replayed inner ops", () => {
  it("take the names of the kernel's original ops, type by type in order", () => {
    const replay = [
      { op_type: "relax.subtract", var_name: "lv" },
      { op_type: "relax.sum", var_name: "gv" },
    ];
    const originals = [
      { op_type: "relax.subtract", var_name: "lv1" },
      { op_type: "relax.sum", var_name: "lv3" },
    ];
    assert.deepEqual(originalNames(replay, originals), ["lv1", "lv3"]);
    assert.deepEqual(originalNames(replay, []), ["lv", "gv"]);
  });
});

describe("plural", () => {
  it("says 1 element, 2 elements", () => {
    assert.equal(plural(1, "element"), "1 element");
    assert.equal(plural(1200, "element"), "1,200 elements");
  });
});

describe("originWords", () => {
  const call = { function_name: "embed", call: 7, vm: 1, function_vms: 1, execution_index: 20 };
  it("says which call and which weight an origin read", () => {
    const weight = { name: "embed_tokens.weight", param_index: 1, tuple_item: 0, weight: true };
    assert.equal(
      originWords({ ...call, origin: true, bad_parameters: [weight], state: [] }),
      "In embed · step 7: the first op to read the weight embed_tokens.weight, which held NaN/∞.",
    );
    assert.equal(
      originWords({ ...call, origin: true, bad_parameters: [], state: ["cache"] }),
      "In embed · step 7: this op made the value from finite inputs; later calls read it back from cache (state), and are no origins.",
    );
  });
  it("says what an alert that is no origin read", () => {
    const data = { name: "x", param_index: 0, tuple_item: null, weight: false };
    assert.equal(
      originWords({ ...call, origin: false, bad_parameters: [data], state: [] }),
      "In embed · step 7: it came in through the function's input x (the caller's data).",
    );
    assert.equal(alertCallText({ ...call, function_name: "", call: null }), "exec 20");
  });
});

describe("runLabels of a disco job", () => {
  it("names each rank and the job's script, not the worker's command line", () => {
    const job = (rank: number, argv: string[]) =>
      run(`job/rank${rank}`, { argv, disco: { job_id: "j1", rank, world_size: 2 } } as Partial<RunInfo>);
    const labels = runLabels([job(0, ["/home/u/serve.py", "--tp", "2"]), job(1, ["/x/worker.py", "1", "2", "1", "12", "11"])]);
    assert.ok(labels[0].startsWith("rank 0 of 2 · serve.py --tp 2 · "), labels[0]);
    assert.ok(labels[1].startsWith("rank 1 of 2 · serve.py --tp 2 · "), labels[1]);
    assert.ok(runLabel(job(1, ["/x/worker.py", "1"])).startsWith("rank 1 of 2 · FULL_HEALTH"), "a worker alone: no script");
  });
});
