import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Api, OpInfo, TraceData } from "../src/api";
import { Store } from "../src/store";

function trace(position: number, opId: number): TraceData {
  return {
    position,
    index: position,
    op_id: opId,
    op_name: `lv${opId}`,
    kernel: "k",
    graph_id: 0,
    output_slot: 0,
    execution_index: 0,
  } as TraceData;
}

function op(opId: number, frameIds: number[]): OpInfo {
  return {
    op_id: opId,
    op_name: `lv${opId}`,
    stack_frame_ids: frameIds,
    location: { file_path: "/u/model.py", line: 12, function: "forward" },
  } as unknown as OpInfo;
}

/** An Api double whose answers the test releases in any order. */
function controllable(...more: string[]) {
  const pending: { route: string; args: unknown[]; resolve: (v: unknown) => void }[] = [];
  const call =
    (route: string) =>
    (...args: unknown[]) =>
      new Promise((resolve) => pending.push({ route, args, resolve }));
  const routes = ["traces", "opInfo", "stackFrames", ...more];
  const api = Object.fromEntries(routes.map((r) => [r, call(r)])) as unknown as Api;
  return { api, pending };
}

describe("Store", () => {
  it("selects a trace, then its op, its stack and the user's frame", async () => {
    const { api, pending } = controllable();
    const s = new Store(api);
    s.run = "r";
    const done = s.selectTrace(7);
    assert.equal(s.tracePosition, 7);
    pending.shift()!.resolve({ graph_executions: [trace(7, 3)] });
    await Promise.resolve();
    await Promise.resolve();
    pending.shift()!.resolve(op(3, [10, 11]));
    await new Promise((r) => setTimeout(r, 0));
    const frames = [
      { id: 10, file_path: "/u/train.py", file_index: 0, line: 80, function: "<module>" },
      { id: 11, file_path: "/u/model.py", file_index: 1, line: 12, function: "forward" },
    ];
    pending.shift()!.resolve({ stack_frames: frames });
    await done;
    assert.equal(s.trace?.position, 7);
    assert.equal(s.op?.op_id, 3);
    assert.deepEqual(s.frame, frames[1]);
  });

  it("ignores a slow answer for an older selection", async () => {
    const { api, pending } = controllable();
    const s = new Store(api);
    s.run = "r";
    const first = s.selectTrace(1);
    const second = s.selectTrace(2);
    const [a, b] = pending.splice(0, 2);
    b.resolve({ graph_executions: [trace(2, 5)] });
    await new Promise((r) => setTimeout(r, 0));
    a.resolve({ graph_executions: [trace(1, 4)] }); // arrives late
    await new Promise((r) => setTimeout(r, 0));
    pending.find((p) => p.route === "opInfo")!.resolve(op(5, []));
    await Promise.all([first, second]);
    assert.equal(s.tracePosition, 2);
    assert.equal(s.trace?.op_id, 5);
    assert.equal(s.op?.op_id, 5);
    assert.equal(pending.filter((p) => p.route === "opInfo").length, 1);
  });

  it("shows errors instead of swallowing them", async () => {
    const api = {
      traces: async () => Promise.reject(new Error("graph_execution/data: HTTP 404: no trace at position 99")),
    } as unknown as Api;
    const s = new Store(api);
    s.run = "r";
    let seen = 0;
    s.on("error", () => seen++);
    await s.selectTrace(99);
    assert.equal(seen, 1);
    assert.ok(s.errors[0].message.includes("no trace at position 99"));
  });

  it("keeps the selected run while runs refresh, and falls back when it disappears", () => {
    const s = new Store({} as Api);
    const run = (name: string) => ({ run: name }) as never;
    s.setRuns([run("a"), run("b")]);
    assert.equal(s.run, "b");
    s.selectRun("a");
    s.setRuns([run("a"), run("b"), run("c")]);
    assert.equal(s.run, "a");
    s.setRuns([run("c")]);
    assert.equal(s.run, "c");
  });
});

describe("Store's default run", () => {
  const run = (name: string, live = false) => ({ run: name, live }) as never;
  const why = "the run whose first NaN/Inf was recorded first";

  it("opens on the backend's default run, not the newest", () => {
    const s = new Store({} as Api);
    s.setRuns([run("nan/1"), run("z_fixed/2")], "nan/1", why);
    assert.equal(s.run, "nan/1");
    assert.equal(s.defaultReason, why);
  });

  it("shows a stand-in until the default is known, then the default once, then keeps it", () => {
    const s = new Store({} as Api);
    s.setRuns([run("a"), run("b")], null); // the runs are still being read
    assert.equal(s.run, "b");
    s.setRuns([run("a"), run("b")], "a", why);
    assert.equal(s.run, "a");
    s.setRuns([run("a"), run("b")], "b", "the newest run"); // a later change never moves the view
    assert.equal(s.run, "a");
  });

  it("keeps the user's pick, selects a live run that starts, falls back to the default", () => {
    const s = new Store({} as Api);
    s.setRuns([run("a"), run("b")], "a", why);
    s.pickRun("b");
    s.setRuns([run("a"), run("b")], "a", why);
    assert.equal(s.run, "b");
    s.setRuns([run("a"), run("b"), run("c", true)], "a", why);
    assert.equal(s.run, "c");
    s.setRuns([run("a"), run("b")], "a", why); // c's directory went
    assert.equal(s.run, "a");
    s.setRuns([run("a"), run("b")], "gone", why); // a default that is not listed is ignored
    assert.equal(s.defaultRun, null);
  });

  it("picking the run shown keeps its state (its alerts are not loaded again)", () => {
    const s = new Store({} as Api);
    s.setRuns([run("a"), run("b")], "a", why);
    s.alertExecutions = new Set([1]);
    s.pickRun("a");
    assert.deepEqual([...s.alertExecutions], [1]);
    s.pickRun("b");
    assert.equal(s.run, "b");
    assert.equal(s.alertExecutions.size, 0);
  });

  it("lists a run's graphs once, and again when the run compiled more", async () => {
    const asked: string[] = [];
    const api = { graphs: async (run: string) => (asked.push(run), { graphs: [{ graph_id: 1, name: "main" }] }) } as unknown as Api;
    const s = new Store(api);
    s.setRuns([run("a"), run("b")], "a", why);
    assert.deepEqual(
      (await s.graphs()).map((g) => g.name),
      ["main"],
    );
    await s.graphs();
    assert.deepEqual(asked, ["a"]);
    s.setRuns([{ run: "a", live: false, num_graphs: 2 } as never, run("b")], "a", why);
    await s.graphs();
    s.pickRun("b");
    await s.graphs();
    assert.deepEqual(asked, ["a", "a", "b"]);
  });

  it("a live run already running when the page opens wins over the default", () => {
    const s = new Store({} as Api);
    s.setRuns([run("a"), run("b", true)], "a", why);
    assert.equal(s.run, "b");
  });
});

describe("Store during a live pause", () => {
  const pause = (pauseId: number, callRow: number | null) => ({
    pauseId,
    opId: 3,
    graphId: 0,
    opName: "lv3",
    kernel: "log",
    functionName: "main",
    executionIndex: 4,
    reason: "step",
    nonfinite: [],
    source: null,
    callTraces: 2,
    callRow,
    inputs: [],
    outputs: [],
  });

  it("selects the paused kernel among its call's rows, which the dump does not hold yet", async () => {
    const api = { traces: async () => ({ graph_executions: [] }), opInfo: async () => op(3, []) } as unknown as Api;
    const s = new Store(api);
    s.run = "r";
    const seen: number[] = [];
    s.on("trace", () => seen.push(s.pausedRow ?? -1));
    s.setPause(pause(1, 1));
    await new Promise((r) => setTimeout(r, 0));
    assert.equal(s.pausedRow, 1);
    assert.equal(s.tracePosition, null);
    assert.equal(s.op?.op_id, 3);
    assert.ok(seen.includes(1));
    s.setPause(null); // resumed: the row is the dump's once the call returns
    assert.equal(s.pausedRow, null);
    s.setPause(pause(2, null)); // an untraced kernel: its op only
    await new Promise((r) => setTimeout(r, 0));
    assert.equal(s.pausedRow, null);
    assert.equal(s.op?.op_id, 3);
  });

  it("a recorded kernel selected elsewhere replaces the paused row", async () => {
    const api = {
      traces: async (_run: string, begin: number) => ({ graph_executions: [trace(begin, 3)] }),
      opInfo: async () => op(3, []),
    } as unknown as Api;
    const s = new Store(api);
    s.run = "r";
    s.pause = pause(1, 0);
    await s.selectPausedTrace(0, 3);
    assert.equal(s.pausedRow, 0);
    await s.selectTrace(5);
    assert.equal(s.pausedRow, null);
    assert.equal(s.tracePosition, 5);
  });
});

describe("Store with a circular buffer", () => {
  const rows = (start: number) => ({
    traces: async (_run: string, begin: number) => ({ graph_executions: [{ ...trace(begin, 1), index: start + begin }] }),
    opInfo: async () => op(1, []),
  });

  it("corrects a position that shifted since the list was read, by the trace's index", async () => {
    const s = new Store(rows(10) as unknown as Api); // position p now holds trace #10+p
    s.run = "r";
    await s.selectTrace(5, 12); // the list said #12 was at 5; it is now at 2
    assert.equal(s.trace?.index, 12);
    assert.equal(s.tracePosition, 2);
    assert.deepEqual(s.errors, []);
  });

  it("says so when the trace was dropped instead of showing another one", async () => {
    const s = new Store(rows(100) as unknown as Api); // #12 is long gone
    s.run = "r";
    await s.selectTrace(5, 12);
    assert.equal(s.trace, null);
    assert.ok(s.errors[0].message.includes("no longer in the dump"));
  });
});
