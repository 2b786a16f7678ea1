/** Source code and stack trace of the selected op's creation: user frames first; a click on a
 * frame (or an original op of a fused kernel) shows its file with the line highlighted. */
import hljs from "highlight.js/lib/core";
import python from "highlight.js/lib/languages/python";
import type { Op, SourceFile } from "../api";
import { h, scrollWithin, setChildren } from "../dom";
import { baseName, orderFrames } from "../format";
import type { ShownFrame, Store } from "../store";

hljs.registerLanguage("python", python);

export class StackPanel {
  readonly el: HTMLElement;
  private readonly body: HTMLElement;

  constructor(private readonly store: Store) {
    this.body = h("div", { class: "panel-body stack-body" });
    this.el = h(
      "section",
      { class: "panel stack-panel", "data-panel": "stack-trace" },
      h("header", { class: "panel-head" }, h("h2", null, "Stack trace")),
      this.body,
    );
    store.on("op", () => this.render());
    store.on("frame", () => this.render());
    store.on("run", () => this.render());
  }

  private render(): void {
    const op = this.store.op;
    if (!op) return setChildren(this.body, h("div", { class: "empty" }, "Select a kernel execution to see where its op was created."));
    const shown = this.store.frame;
    const rows = orderFrames(this.store.frames);
    setChildren(
      this.body,
      h("div", { class: "muted small" }, `Creation of `, h("b", null, op.op_name), ` (${op.kernel})`),
      rows.length === 0 ? noStack(this.store, op) : null,
      h(
        "ol",
        { class: "frames" },
        rows.map(({ frame, user, depth }, i) => {
          const prevUser = i > 0 && rows[i - 1].user;
          return [
            !user && (i === 0 || prevUser) ? h("li", { class: "frames-sep muted small" }, "library frames") : null,
            h(
              "li",
              {
                class: `frame${user ? " user-frame" : " lib-frame"}${shown && shown.file_path === frame.file_path && shown.line === frame.line ? " selected" : ""}`,
                title: frame.file_path,
                "data-depth": String(depth),
                onclick: () => this.store.showFrame(frame),
              },
              h("span", { class: "frame-file" }, `${baseName(frame.file_path)}:${frame.line}`),
              h("span", { class: "frame-fn muted" }, frame.function),
            ),
          ];
        }),
      ),
    );
  }
}

export class SourcePanel {
  readonly el: HTMLElement;
  private readonly title: HTMLElement;
  private readonly body: HTMLElement;
  private files = new Map<string, SourceFile>();
  private paths: Map<string, number> | null = null;
  private seq = 0;

  constructor(private readonly store: Store) {
    this.title = h("span", { class: "muted source-path" });
    this.body = h("div", { class: "panel-body source-body" });
    this.el = h(
      "section",
      { class: "panel source-panel", "data-panel": "source" },
      h("header", { class: "panel-head" }, h("h2", null, "Source code"), this.title),
      this.body,
    );
    store.on("run", () => {
      this.files.clear();
      this.paths = null;
    });
    store.on("frame", () => void this.show(store.frame));
  }

  private async fileIndex(run: string, frame: ShownFrame): Promise<number> {
    if (frame.file_index >= 0) return frame.file_index;
    if (!this.paths) {
      const list = await this.store.api.get<{ source_files: { index: number; file_path: string }[] }>("source_files/list", { run });
      this.paths = new Map(list.source_files.map((f) => [f.file_path, f.index]));
    }
    return this.paths.get(frame.file_path) ?? -1;
  }

  private async show(frame: ShownFrame | null): Promise<void> {
    const seq = ++this.seq;
    const run = this.store.run;
    if (!frame || run === null) {
      this.title.textContent = "";
      return setChildren(this.body, h("div", { class: "empty" }, "No source location."));
    }
    this.title.textContent = `${frame.file_path}:${frame.line}`;
    try {
      const index = await this.fileIndex(run, frame);
      if (index < 0) {
        setChildren(
          this.body,
          h(
            "div",
            { class: "empty" },
            `The file ${frame.file_path} was not recorded in the dump (it could not be read when the op was created).`,
          ),
        );
        return;
      }
      const key = `${run}|${index}`;
      let file = this.files.get(key);
      if (!file) {
        file = await this.store.api.sourceFile(run, index);
        this.files.set(key, file);
      }
      if (seq !== this.seq) return;
      this.renderFile(file, frame.line);
    } catch (err) {
      if (seq !== this.seq) return;
      setChildren(this.body, h("div", { class: "error-box" }, String(err instanceof Error ? err.message : err)));
      this.store.reportError(err);
    }
  }

  private renderFile(file: SourceFile, line: number): void {
    const highlighted = highlightLines(file.lines);
    const rows = highlighted.map((html, i) => {
      const code = h("span", { class: "code" });
      code.innerHTML = html || " ";
      return h(
        "div",
        { class: `src-line${i + 1 === line ? " highlighted" : ""}`, "data-line": String(i + 1) },
        h("span", { class: "ln" }, String(i + 1)),
        code,
      );
    });
    const pre = h("div", { class: "src hljs" }, rows);
    setChildren(this.body, pre);
    const target = rows[line - 1];
    if (target) scrollWithin(this.body, target, true);
  }
}

/** Highlights a Python file as a whole (so multi-line strings stay right) and splits the HTML
 * back into lines, closing and reopening spans at line breaks. */
export function highlightLines(lines: string[]): string[] {
  const html = hljs.highlight(lines.join("\n"), { language: "python", ignoreIllegals: true }).value;
  const out: string[] = [];
  const open: string[] = [];
  let current = "";
  const re = /(<span[^>]*>)|(<\/span>)|(\n)|([^<\n]+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(html))) {
    if (m[1]) {
      open.push(m[1]);
      current += m[1];
    } else if (m[2]) {
      open.pop();
      current += m[2];
    } else if (m[3]) {
      out.push(current + "</span>".repeat(open.length));
      current = open.join("");
    } else current += m[4];
  }
  out.push(current + "</span>".repeat(open.length));
  return out.slice(0, lines.length);
}

/** Why an op has no creation stack: a gradient function that tvm.relax.training generated
 * (`*_adjoint`) has no user line; otherwise it was compiled before tvmdbg, or unmapped. */
function noStack(store: Store, op: Op): HTMLElement {
  const el = h(
    "div",
    { class: "empty", "data-testid": "no-stack" },
    "No stack recorded for this op (compiled before tvmdbg was enabled, or by a path without source mapping).",
  );
  void store
    .graphInfo(op.graph_id)
    .then((g) => {
      if (store.op === op && g.name.endsWith("_adjoint"))
        el.textContent = `No user source line: tvm.relax.training generated this op for the gradient function ${g.name} (from the forward function's ops).`;
    })
    .catch(() => undefined);
  return el;
}
