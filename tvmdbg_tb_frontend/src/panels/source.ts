/** Source code and stack trace of the selected op's creation: user frames first; a click on a
 * frame (or an original op of a fused kernel) shows its file with the line highlighted. */
import hljs from "highlight.js/lib/core";
import python from "highlight.js/lib/languages/python";
import type { Op, SourceFile } from "../api";
import { h, scrollWithin, setChildren } from "../dom";
import { baseName, isUserFrame, orderFrames } from "../format";
import { opLocations } from "../search";
import type { ShownFrame, Store } from "../store";

hljs.registerLanguage("python", python);

export class StackPanel {
  readonly el: HTMLElement;
  private readonly body: HTMLElement;
  private readonly of: HTMLElement;

  constructor(private readonly store: Store) {
    this.body = h("div", { class: "panel-body stack-body" });
    this.of = h("span", { class: "muted small stack-of" });
    this.el = h(
      "section",
      { class: "panel stack-panel", "data-panel": "stack-trace" },
      h("header", { class: "panel-head" }, h("h2", null, "Stack trace"), this.of),
      this.body,
    );
    store.on("op", () => this.render());
    store.on("frame", () => this.render());
    store.on("run", () => this.render());
  }

  private render(): void {
    const op = this.store.op;
    if (!op) {
      setChildren(this.of);
      return setChildren(this.body, h("div", { class: "empty" }, "Select a kernel execution to see where its op was created."));
    }
    const shown = this.store.frame;
    const rows = orderFrames(this.store.frames);
    setChildren(this.of, `creation of `, h("b", null, op.op_name), ` (${op.kernel})`);
    setChildren(
      this.body,
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

interface FileEntry {
  index: number;
  file_path: string;
  num_lines: number;
}

/**
 * The source of the selected op's line, and a browser of every file the run's stacks name
 * (the files recorded in the dump): pick one in the header to read it. Lines that created
 * ops carry a mark; clicking the line number of a marked line selects its op.
 */
export class SourcePanel {
  readonly el: HTMLElement;
  private readonly title: HTMLElement;
  private readonly body: HTMLElement;
  private readonly picker: HTMLSelectElement;
  private files = new Map<string, SourceFile>();
  private list: FileEntry[] | null = null;
  private listFor = "";
  private seq = 0;

  constructor(private readonly store: Store) {
    this.title = h("span", { class: "muted source-path" });
    this.body = h("div", { class: "panel-body source-body", tabindex: "0", "aria-label": "source code" });
    this.picker = h("select", {
      class: "source-picker",
      "aria-label": "source file",
      "data-testid": "source-picker",
      title: "the files this run's stacks name",
      onchange: () => void this.openFile(Number(this.picker.value)),
    });
    this.el = h(
      "section",
      { class: "panel source-panel", "data-panel": "source" },
      h("header", { class: "panel-head" }, h("h2", null, "Source code"), this.picker, this.title),
      this.body,
    );
    store.on("run", () => {
      this.files.clear();
      this.list = null;
      this.listFor = "";
      setChildren(this.picker);
      void this.loadList();
    });
    store.on("runs", () => void this.loadList());
    store.on("frame", () => void this.show(store.frame));
  }

  /** The recorded files, user files first (re-read while a live run records more). */
  private async loadList(): Promise<FileEntry[]> {
    const run = this.store.run;
    if (run === null) return [];
    const key = `${run}|${this.store.runInfo?.num_ops ?? 0}`;
    if (this.list && this.listFor === key) return this.list;
    try {
      const files = (await this.store.api.sourceFiles(run)).source_files;
      if (this.store.run !== run) return [];
      const user = files.filter((f) => isUserFrame(f));
      const library = files.filter((f) => !isUserFrame(f));
      this.list = [...user, ...library];
      this.listFor = key;
      const shown = this.picker.value;
      setChildren(
        this.picker,
        h("option", { value: "", disabled: true }, this.list.length ? `files (${this.list.length})` : "no file recorded"),
        user.length
          ? h(
              "optgroup",
              { label: "your code" },
              user.map((f) => this.option(f)),
            )
          : null,
        library.length
          ? h(
              "optgroup",
              { label: "libraries" },
              library.map((f) => this.option(f)),
            )
          : null,
      );
      this.picker.value = shown;
      return this.list;
    } catch (err) {
      this.store.reportError(err);
      return [];
    }
  }

  private option(f: FileEntry): HTMLOptionElement {
    return h("option", { value: String(f.index), title: f.file_path }, `${baseName(f.file_path)} (${f.num_lines} lines)`);
  }

  private async fileIndex(frame: ShownFrame): Promise<number> {
    if (frame.file_index >= 0) return frame.file_index;
    const list = await this.loadList();
    return list.find((f) => f.file_path === frame.file_path)?.index ?? -1;
  }

  /** A file picked in the browser: shown from its first line that created an op. */
  private async openFile(index: number): Promise<void> {
    const entry = this.list?.find((f) => f.index === index);
    if (!entry) return;
    const marks = await this.opLines(entry.file_path);
    const first = [...marks.keys()].sort((a, b) => a - b)[0] ?? 1;
    this.store.showFrame({ file_path: entry.file_path, file_index: index, line: first, function: "" });
  }

  /** line -> ops created there, in one file. */
  private async opLines(filePath: string): Promise<Map<number, Op[]>> {
    const out = new Map<number, Op[]>();
    try {
      for (const op of (await this.store.allOps()).ops)
        for (const loc of opLocations(op)) {
          if (loc.file_path !== filePath) continue;
          const list = out.get(loc.line);
          if (list) list.push(op);
          else out.set(loc.line, [op]);
        }
    } catch (err) {
      this.store.reportError(err);
    }
    return out;
  }

  private async show(frame: ShownFrame | null): Promise<void> {
    const seq = ++this.seq;
    const run = this.store.run;
    if (!frame || run === null) {
      this.title.textContent = "";
      return setChildren(this.body, h("div", { class: "empty" }, "No source location. Pick a file above to browse the run's code."));
    }
    // The file's name and the line (never cut off), its directory in the tooltip: set with the
    // panel's body, so the name never stands over the previous file's lines while this loads.
    const entitle = () => {
      this.title.textContent = `${baseName(frame.file_path)}:${frame.line}`;
      this.title.title = `${frame.file_path}:${frame.line}`;
    };
    try {
      const index = await this.fileIndex(frame);
      if (seq !== this.seq) return;
      this.picker.value = index >= 0 ? String(index) : "";
      if (index < 0) {
        entitle();
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
      const marks = await this.opLines(file.file_path);
      if (seq !== this.seq) return;
      entitle();
      this.renderFile(file, frame.line, marks);
    } catch (err) {
      if (seq !== this.seq) return;
      entitle();
      setChildren(this.body, h("div", { class: "error-box" }, String(err instanceof Error ? err.message : err)));
      this.store.reportError(err);
    }
  }

  private renderFile(file: SourceFile, line: number, marks: Map<number, Op[]>): void {
    const highlighted = highlightLines(file.lines);
    const selectedOp = this.store.op?.op_id;
    const rows = highlighted.map((html, i) => {
      const code = h("span", { class: "code" });
      code.innerHTML = html || " ";
      const ops = marks.get(i + 1);
      const here = ops?.some((o) => o.op_id === selectedOp);
      return h(
        "div",
        { class: `src-line${i + 1 === line ? " highlighted" : ""}${ops ? " has-ops" : ""}`, "data-line": String(i + 1) },
        ops
          ? h(
              "button",
              {
                class: `ln op-mark${here ? " current" : ""}`,
                title: `created ${ops.map((o) => `${o.op_name} (${o.kernel})`).join(", ")}: click to select`,
                "data-ops": ops.map((o) => o.op_id).join(","),
                onclick: () => {
                  // Cycles through the line's ops, from the one after the selected.
                  const at = ops.findIndex((o) => o.op_id === this.store.op?.op_id);
                  void this.store.goToOp(ops[(at + 1) % ops.length].op_id);
                },
              },
              String(i + 1),
            )
          : h("span", { class: "ln" }, String(i + 1)),
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
