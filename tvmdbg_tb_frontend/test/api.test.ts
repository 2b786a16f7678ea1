import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Api, ApiError, routeUrl } from "../src/api";

function fakeFetch(status: number, body: string) {
  const urls: string[] = [];
  const fn = async (url: string) => {
    urls.push(url);
    return { ok: status >= 200 && status < 300, status, text: async () => body };
  };
  return { urls, fn };
}

describe("Api", () => {
  it("builds relative URLs with encoded parameters and no undefined ones", () => {
    assert.equal(routeUrl("runs"), "runs");
    assert.equal(routeUrl("alerts", { run: "a b/c", begin: 0, end: -1, alert_type: undefined }), "alerts?run=a%20b%2Fc&begin=0&end=-1");
  });

  it("sends a run name that is not UTF-8 (a lone surrogate) as the server finds it: U+FFFD", () => {
    assert.equal(routeUrl("runs", { run: "bytes\udcff\u001b" }), "runs?run=bytes%EF%BF%BD%1B");
    assert.equal(routeUrl("runs", { run: "a\ud83d\ude00b" }), "runs?run=a%F0%9F%98%80b"); // a pair stays
  });

  it("passes the backend's error message through", async () => {
    const f = fakeFetch(404, JSON.stringify({ error: "unknown run 'x'" }));
    const api = new Api(f.fn);
    const err = await api.alerts("x", 0, 10).catch((e) => e);
    assert.ok(err instanceof ApiError);
    assert.equal(err.status, 404);
    assert.ok(err.message.includes("unknown run 'x'"));
    assert.deepEqual(f.urls, ["alerts?run=x&begin=0&end=10"]);
  });

  it("reports non-JSON answers and unreachable servers", async () => {
    await assert.rejects(new Api(fakeFetch(200, "<html>").fn).runs(), { message: /not JSON/ });
    await assert.rejects(new Api(fakeFetch(500, "Internal Server Error").fn).runs(), { message: /HTTP 500: Internal Server Error/ });
    const down = new Api(async () => {
      throw new TypeError("Failed to fetch");
    });
    await assert.rejects(down.runs(), { message: /cannot reach TensorBoard/ });
  });

  it("joins stack frame ids with commas", async () => {
    const f = fakeFetch(200, JSON.stringify({ stack_frames: [] }));
    await new Api(f.fn).stackFrames("r", [3, 1, 4]);
    assert.equal(f.urls[0], "stack_frames/stack_frames?run=r&stack_frame_ids=3%2C1%2C4");
  });
});
