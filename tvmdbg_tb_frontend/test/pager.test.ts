import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Pager } from "../src/pager";

function recorder() {
  const calls: [number, number][] = [];
  const fetcher = async (begin: number, end: number) => {
    calls.push([begin, end]);
    return Array.from({ length: end - begin }, (_, i) => begin + i);
  };
  return { calls, fetcher };
}

describe("Pager", () => {
  it("loads only the pages a range overlaps, clamped to the total", async () => {
    const { calls, fetcher } = recorder();
    const p = new Pager(fetcher, 100, 8, 250);
    await p.ensure(90, 120);
    assert.deepEqual(calls, [
      [0, 100],
      [100, 200],
    ]);
    assert.equal(p.get(95), 95);
    assert.equal(p.get(150), 150);
    assert.equal(p.get(210), undefined);
    await p.ensure(240, 10_000);
    assert.deepEqual(calls[2], [200, 250]);
  });

  it("asks once for a page requested twice while in flight", async () => {
    const { calls, fetcher } = recorder();
    const p = new Pager(fetcher, 50, 8, 1000);
    await Promise.all([p.ensure(0, 10), p.ensure(5, 20), p.ensure(0, 50)]);
    assert.deepEqual(calls, [[0, 50]]);
  });

  it("keeps at most maxPages, dropping the least recently used", async () => {
    const { fetcher } = recorder();
    const p = new Pager(fetcher, 10, 3, 1000);
    await p.ensure(0, 10);
    await p.ensure(10, 20);
    await p.ensure(20, 30);
    p.get(0); // page 0 is now the most recent
    await p.ensure(30, 40);
    assert.deepEqual(p.cachedPages().sort(), [0, 2, 3]);
  });

  it("drops answers that arrive after a reset", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const p = new Pager<number>(
      async (b, e) => {
        await gate;
        return Array.from({ length: e - b }, () => -1);
      },
      10,
      8,
      100,
    );
    const pending = p.ensure(0, 10);
    p.reset(100);
    release();
    await pending;
    assert.equal(p.get(0), undefined);
  });

  it("refetches the partial last page when a live list grows", async () => {
    const { calls, fetcher } = recorder();
    const p = new Pager(fetcher, 100, 8, 150);
    await p.ensure(0, 150);
    p.grow(180);
    await p.ensure(0, 180);
    assert.deepEqual(calls, [
      [0, 100],
      [100, 150],
      [100, 180],
    ]);
    assert.equal(p.get(170), 170);
    p.grow(10); // shrank: the circular buffer moved on, start over
    assert.deepEqual(p.cachedPages(), []);
  });

  it("reports a failed load and lets a later call retry", async () => {
    let fail = true;
    const p = new Pager<number>(
      async (b, e) => {
        if (fail) throw new Error("HTTP 500");
        return Array.from({ length: e - b }, (_, i) => b + i);
      },
      10,
      8,
      30,
    );
    await assert.rejects(p.ensure(0, 5), { message: /HTTP 500/ });
    assert.equal(p.error?.message, "HTTP 500");
    fail = false;
    await p.ensure(0, 5);
    assert.equal(p.error, null);
    assert.equal(p.get(3), 3);
  });

  it("knows a short page is loaded, so a view does not ask for it again", async () => {
    let calls = 0;
    const p = new Pager(
      async (begin: number) => {
        calls += 1;
        return begin === 0 ? [0, 1, 2] : [];
      },
      10,
      8,
      25,
    );
    await p.ensure(0, 25);
    assert.equal(p.get(5), undefined);
    assert.ok(p.hasPage(5) && p.hasPage(24));
    await p.ensure(0, 25);
    assert.equal(calls, 3);
    assert.deepEqual(p.cachedRows(), [0, 1, 2]);
  });
});
