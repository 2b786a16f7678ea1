import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { highlightLines } from "../src/panels/source";

describe("highlightLines", () => {
  it("returns one balanced HTML line per source line, multi-line strings included", () => {
    const src = ["def f(x):", '    s = """a', 'b"""', "    return x  # done", ""];
    const out = highlightLines(src);
    assert.equal(out.length, src.length);
    for (const line of out) {
      assert.equal((line.match(/<span/g) ?? []).length, (line.match(/<\/span>/g) ?? []).length);
    }
    assert.ok(out[0].includes('<span class="hljs-keyword">def</span>'));
    assert.ok(out[2].includes("hljs-string"));
    assert.ok(out[3].includes("hljs-comment"));
    const text = (html: string) =>
      html
        .replace(/<[^>]+>/g, "")
        .replace(/&quot;/g, '"')
        .replace(/&gt;/g, ">")
        .replace(/&lt;/g, "<")
        .replace(/&amp;/g, "&");
    assert.deepEqual(out.map(text), src);
  });
});
