/**
 * The source of the selected op's line, and a browser of every file the run's stacks name (the
 * files recorded in the dump): pick one in the header to read it. Lines that created ops carry a
 * mark; clicking the line number of a marked line selects its op.
 *
 * A file of any size stays responsive: only the lines in view are in the page (a virtual list,
 * ScrollMap keeping the scroll element within the browser's limits at a million lines), the
 * file comes in chunks of CHUNK lines (source_files/file line ranges, with their marks from
 * source_files/op_lines), highlighting runs per chunk and only on chunks of ordinary size, and
 * lines the server cut say so.
 */
import hljs from "highlight.js/lib/core";
import python from "highlight.js/lib/languages/python";
import type { OpLines } from "../api";
import { h, setChildren } from "../dom";
import { baseName, formatCount, isUserFrame } from "../format";
import { ScrollMap } from "../scrollmap";
import type { ShownFrame, Store } from "../store";

hljs.registerLanguage("python", python);

/** Lines fetched, highlighted and cached together. */
export const CHUNK = 500;
/** Height of one source line in px (12 px text, line height 1.5). */
export const LINE_H = 18;
/** Chunks kept per panel (the most recently used). */
const MAX_CHUNKS = 40;
/** A chunk with more text than this is shown without highlighting (highlight.js costs time in
 * proportion to the text: a chunk of 9,000-character lines would hold the page for seconds). */
export const HIGHLIGHT_CHARS = 100_000;

interface FileEntry {
  index: number;
  file_path: string;
  num_lines: number;
}

type LineOps = OpLines["lines"][number];

/** One chunk of a file: its lines as HTML (highlighted or escaped), the lines the server cut
 * (line -> whole length) and the ops each line created. */
export interface Chunk {
  html: string[];
  clipped: Map<number, number>;
  marks: Map<number, LineOps>;
}

export class SourcePanel {
  readonly el: HTMLElement;
  private readonly title: HTMLElement;
  private readonly body: HTMLElement;
  private readonly windowEl: HTMLElement;
  private readonly rowsEl: HTMLElement;
  private readonly spacer: HTMLElement;
  private readonly message: HTMLElement;
  private readonly picker: HTMLSelectElement;
  private list: FileEntry[] | null = null;
  private listing: { key: string; promise: Promise<FileEntry[]> } | null = null;
  private listFor = "";
  private seq = 0;
  /** The file shown, and the line the selection points at. */
  private file: { run: string; entry: FileEntry } | null = null;
  private line = 0;
  private map = new ScrollMap(0, LINE_H, 0);
  private chunks = new Map<string, Chunk>();
  private loading = new Map<string, Promise<void>>();
  private frame = 0;
  private widest = 0;

  constructor(private readonly store: Store) {
    this.title = h("span", { class: "muted source-path" });
    this.rowsEl = h("div", { class: "src hljs" });
    this.windowEl = h("div", { class: "src-window" }, this.rowsEl);
    this.spacer = h("div", { class: "vlist-spacer" });
    this.message = h("div", { class: "source-message", hidden: true });
    this.body = h(
      "div",
      { class: "panel-body source-body", tabindex: "0", "aria-label": "source code", onscroll: () => this.schedule() },
      this.message,
      this.windowEl,
      this.spacer,
    );
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
    new ResizeObserver(() => this.relayout()).observe(this.body);
    store.on("run", () => {
      this.chunks.clear();
      this.loading.clear();
      this.list = null;
      this.listFor = "";
      this.listing = null;
      setChildren(this.picker);
      void this.loadList();
    });
    store.on("runs", () => void this.loadList());
    store.on("frame", () => void this.show(store.frame));
    store.on("op", () => this.render()); // the marks of the selected op's lines
  }

  /** The source's scroll box (arrow keys scroll it), for the keyboard's jump to this panel. */
  /** The selected op's line (its mark, focusable) when it is shown, else the pane. */
  focusTarget(): HTMLElement {
    return this.body.querySelector<HTMLElement>(".src-line.highlighted .op-mark") ?? this.body;
  }

  /** The recorded files, user files first (re-read while a live run records more; one
   * request at a time for the same state). */
  private loadList(): Promise<FileEntry[]> {
    const run = this.store.run;
    if (run === null) return Promise.resolve([]);
    const key = `${run}|${this.store.runInfo?.num_ops ?? 0}`;
    if (this.list && this.listFor === key) return Promise.resolve(this.list);
    if (this.listing?.key !== key) {
      const promise = this.fetchList(run, key);
      this.listing = { key, promise };
      void promise.finally(() => {
        if (this.listing?.promise === promise) this.listing = null;
      });
    }
    return this.listing.promise;
  }

  private async fetchList(run: string, key: string): Promise<FileEntry[]> {
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
    return h("option", { value: String(f.index), title: f.file_path }, `${baseName(f.file_path)} (${formatCount(f.num_lines)} lines)`);
  }

  private async entryOf(frame: ShownFrame): Promise<FileEntry | null> {
    const list = await this.loadList();
    return list.find((f) => (frame.file_index >= 0 ? f.index === frame.file_index : f.file_path === frame.file_path)) ?? null;
  }

  /** A file picked in the browser: shown from its first line that created an op (in its first
   * page of lines), else from its top. */
  private async openFile(index: number): Promise<void> {
    const run = this.store.run;
    const entry = this.list?.find((f) => f.index === index);
    if (!entry || run === null) return;
    let first = 1;
    try {
      const marks = await this.store.api.opLines(run, index, 0, Math.min(entry.num_lines, 10_000));
      first = marks.lines[0]?.line ?? 1;
    } catch (err) {
      this.store.reportError(err);
    }
    this.store.showFrame({ file_path: entry.file_path, file_index: index, line: first, function: "" });
  }

  private say(text: string | null, cls = "empty"): void {
    this.message.hidden = text === null;
    this.message.className = `source-message ${cls}`;
    this.message.textContent = text ?? "";
  }

  private async show(frame: ShownFrame | null): Promise<void> {
    const seq = ++this.seq;
    const run = this.store.run;
    if (!frame || run === null) {
      this.title.textContent = "";
      this.setFile(null, 0);
      return this.say("No source location. Pick a file above to browse the run's code.");
    }
    // The file's name and the line (never cut off), its directory in the tooltip: set with the
    // panel's lines, so the name never stands over the previous file's lines while this loads.
    const entitle = () => {
      this.title.textContent = `${baseName(frame.file_path)}:${frame.line}`;
      this.title.title = `${frame.file_path}:${frame.line}`;
    };
    try {
      const entry = await this.entryOf(frame);
      if (seq !== this.seq) return;
      this.picker.value = entry ? String(entry.index) : "";
      entitle();
      if (!entry) {
        this.setFile(null, 0);
        return this.say(`The file ${frame.file_path} was not recorded in the dump (it could not be read when the op was created).`);
      }
      this.say(null);
      this.setFile({ run, entry }, frame.line);
      await this.ensure(this.chunkOf(frame.line - 1));
    } catch (err) {
      if (seq !== this.seq) return;
      entitle();
      this.setFile(null, 0);
      this.say(String(err instanceof Error ? err.message : err), "error-box");
      this.store.reportError(err);
    }
  }

  /** Shows a file (null: none) centred on `line`. */
  private setFile(file: { run: string; entry: FileEntry } | null, line: number): void {
    const same = file && this.file && file.run === this.file.run && file.entry.index === this.file.entry.index;
    this.file = file;
    this.line = line;
    if (!same) this.widest = 0;
    const digits = String(file?.entry.num_lines ?? 1).length;
    this.rowsEl.style.setProperty("--ln-width", `${Math.max(3, digits) + 1}ch`);
    this.relayout();
    if (file && line > 0) this.body.scrollTop = this.map.scrollTopFor(line - 1, "center");
    this.render();
  }

  private relayout(): void {
    const rows = this.file?.entry.num_lines ?? 0;
    const top = this.map.contentTopFor(this.body.scrollTop);
    this.map = new ScrollMap(rows, LINE_H, this.body.clientHeight);
    this.windowEl.style.height = `${this.body.clientHeight}px`;
    this.spacer.style.height = `${Math.max(0, this.map.spacerHeight - this.body.clientHeight)}px`;
    const scrollTop = this.map.scrollTopForContent(top);
    if (Math.abs(scrollTop - this.body.scrollTop) >= 1) this.body.scrollTop = scrollTop;
    this.render();
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  private chunkOf(position: number): number {
    return Math.floor(position / CHUNK);
  }

  private key(c: number): string {
    return this.file ? `${this.file.run}|${this.file.entry.index}|${c}` : "";
  }

  /** Loads chunk c of the file shown (its lines and marks), once; renders when it arrives. */
  private ensure(c: number): Promise<void> {
    const file = this.file;
    if (!file) return Promise.resolve();
    const key = this.key(c);
    if (this.chunks.has(key)) return Promise.resolve();
    let p = this.loading.get(key);
    if (!p) {
      p = loadChunk(this.store, file.run, file.entry, c)
        .then((chunk) => {
          this.chunks.set(key, chunk);
          while (this.chunks.size > MAX_CHUNKS) this.chunks.delete(this.chunks.keys().next().value as string);
          if (this.key(c) === key) this.render();
        })
        .catch((err) => this.store.reportError(err))
        .finally(() => this.loading.delete(key));
      this.loading.set(key, p);
    }
    return p;
  }

  private render(): void {
    const file = this.file;
    if (!file) {
      this.rowsEl.replaceChildren();
      return;
    }
    const w = this.map.window(this.body.scrollTop, 4);
    const selected = this.store.op?.op_id;
    const rows: HTMLElement[] = [];
    const missing = new Set<number>();
    for (let i = w.first; i < w.end; i++) {
      const c = this.chunkOf(i);
      const chunk = this.chunks.get(this.key(c));
      if (chunk) this.chunks.set(this.key(c), this.chunks.get(this.key(c))!); // kept as recently used
      const line = i + 1;
      if (!chunk) {
        missing.add(c);
        rows.push(h("div", { class: "src-line loading", "data-line": String(line) }, h("span", { class: "ln" }, String(line)), ""));
        continue;
      }
      rows.push(this.row(line, chunk, selected));
    }
    this.rowsEl.style.transform = `translateY(${w.offsetPx}px)`;
    this.rowsEl.replaceChildren(...rows);
    // The widest line seen so far sets the sideways scroll range (it never jumps back).
    const width = this.rowsEl.scrollWidth;
    if (width > this.widest) {
      this.widest = width;
      this.windowEl.style.minWidth = `${width}px`;
    }
    for (const c of missing) void this.ensure(c);
  }

  private row(line: number, chunk: Chunk, selected: number | undefined): HTMLElement {
    const k = (line - 1) % CHUNK;
    const code = h("span", { class: "code" });
    code.innerHTML = chunk.html[k] || " ";
    const cut = chunk.clipped.get(line);
    const ops = chunk.marks.get(line);
    const here = ops?.ops.some((o) => o.op_id === selected);
    const more = ops && ops.num_ops > ops.ops.length ? ` and ${formatCount(ops.num_ops - ops.ops.length)} more` : "";
    return h(
      "div",
      { class: `src-line${line === this.line ? " highlighted" : ""}${ops ? " has-ops" : ""}`, "data-line": String(line) },
      ops
        ? h(
            "button",
            {
              class: `ln op-mark${here ? " current" : ""}`,
              tabindex: "-1", // a mouse shortcut: the keyboard selects ops in the lists and the graph
              title: `created ${ops.ops.map((o) => `${o.op_name} (${o.kernel})`).join(", ")}${more}: click to select`,
              "data-ops": ops.ops.map((o) => o.op_id).join(","),
              onclick: () => {
                // Cycles through the line's ops, from the one after the selected.
                const at = ops.ops.findIndex((o) => o.op_id === this.store.op?.op_id);
                void this.store.goToOp(ops.ops[(at + 1) % ops.ops.length].op_id);
              },
            },
            String(line),
          )
        : h("span", { class: "ln" }, String(line)),
      code,
      cut !== undefined ? h("span", { class: "clipped-note muted" }, ` … cut: the line has ${formatCount(cut)} characters`) : null,
    );
  }
}

/** Chunk c of a file: its lines page by page (a page ends early on long lines), highlighted
 * when it is of ordinary size, and the ops its lines created. */
export async function loadChunk(store: Store, run: string, entry: FileEntry, c: number): Promise<Chunk> {
  const begin = c * CHUNK;
  const end = Math.min(entry.num_lines, begin + CHUNK);
  const marks = store.api.opLines(run, entry.index, begin, end);
  const lines: string[] = [];
  const clipped = new Map<number, number>();
  for (let at = begin; at < end;) {
    const page = await store.api.sourceFile(run, entry.index, at, end);
    lines.push(...page.lines);
    for (const cut of page.clipped) clipped.set(cut.line, cut.length);
    if (page.end <= at) break; // the file shrank: never loop
    at = page.end;
  }
  const chars = lines.reduce((a, l) => a + l.length, 0);
  const html = chars <= HIGHLIGHT_CHARS ? highlightLines(lines) : lines.map(escapeHtml);
  return { html, clipped, marks: new Map((await marks).lines.map((l) => [l.line, l])) };
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[ch]!);
}

/** Highlights Python lines as a whole (so multi-line strings stay right) and splits the HTML
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
