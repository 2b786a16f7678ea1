import { describe, expect, it } from "vitest";
import { highlightLines } from "../src/panels/source";

describe("highlightLines", () => {
  it("returns one balanced HTML line per source line, multi-line strings included", () => {
    const src = ['def f(x):', '    s = """a', 'b"""', "    return x  # done", ""];
    const out = highlightLines(src);
    expect(out.length).toBe(src.length);
    for (const line of out) {
      expect((line.match(/<span/g) ?? []).length).toBe((line.match(/<\/span>/g) ?? []).length);
    }
    expect(out[0]).toContain('<span class="hljs-keyword">def</span>');
    expect(out[2]).toContain("hljs-string");
    expect(out[3]).toContain("hljs-comment");
    const text = (html: string) => html.replace(/<[^>]+>/g, "").replace(/&quot;/g, '"').replace(/&gt;/g, ">").replace(/&lt;/g, "<").replace(/&amp;/g, "&");
    expect(out.map(text)).toEqual(src);
  });
});
