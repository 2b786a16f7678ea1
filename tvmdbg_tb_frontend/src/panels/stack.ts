/** The creation stack of the selected op: the user's frames first; a click on a frame shows its
 * file at its line in the source panel. */
import type { Op } from "../api";
import { h, setChildren } from "../dom";
import { baseName, orderFrames } from "../format";
import { keepFocus, roving, setTabStop } from "../roving";
import type { Store } from "../store";

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

  /** The list's current frame (its Tab stop), for the keyboard's jump to this panel. */
  focusTarget(): HTMLElement | null {
    return this.body.querySelector<HTMLElement>(".frame[tabindex='0']");
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
    const list = h(
      "ol",
      { class: "frames", role: "listbox", "aria-label": "creation stack (arrow keys move, Enter shows the line)" },
      rows.map(({ frame, user, depth }, i) => {
        const prevUser = i > 0 && rows[i - 1].user;
        const show = () => this.store.showFrame(frame);
        return [
          !user && (i === 0 || prevUser) ? h("li", { class: "frames-sep muted small", role: "presentation" }, "library frames") : null,
          h(
            "li",
            {
              class: `frame${user ? " user-frame" : " lib-frame"}${shown && shown.file_path === frame.file_path && shown.line === frame.line ? " selected" : ""}`,
              role: "option",
              title: frame.file_path,
              "data-depth": String(depth),
              "data-key": `${frame.id}`,
              onclick: show,
              onkeydown: (e: KeyboardEvent) => (e.key === "Enter" || e.key === " ") && (e.preventDefault(), show()),
            },
            h("span", { class: "frame-file" }, `${baseName(frame.file_path)}:${frame.line}`),
            h("span", { class: "frame-fn muted" }, frame.function),
          ),
        ];
      }),
    );
    const frames = [...list.querySelectorAll<HTMLElement>(".frame")];
    setTabStop(frames, frames.find((f) => f.classList.contains("selected")) ?? null);
    roving(list, ".frame", "vertical");
    keepFocus(this.body, () => setChildren(this.body, rows.length === 0 ? noStack(this.store, op) : null, list));
  }
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
    .graphs()
    .then((graphs) => {
      const g = graphs.find((x) => x.graph_id === op.graph_id);
      if (store.op === op && g?.name.endsWith("_adjoint"))
        el.textContent = `No user source line: tvm.relax.training generated this op for the gradient function ${g.name} (from the forward function's ops).`;
    })
    .catch(() => undefined);
  return el;
}
