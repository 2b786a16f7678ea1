/** The top bar: run picker, live state, reader problems, and the backend's errors. */
import type { Status } from "../api";
import { h, setChildren } from "../dom";
import { formatAgo, formatCount } from "../format";
import type { Store } from "../store";
import { CompletenessBanner } from "./completeness";

export class HeaderBar {
  readonly el: HTMLElement;
  private readonly runSelect: HTMLSelectElement;
  private readonly live: HTMLElement;
  private readonly info: HTMLElement;
  readonly problems: HTMLElement;
  readonly errors: HTMLElement;
  status: Status | null = null;
  private readonly completeness = new CompletenessBanner();
  lastPoll = 0;

  constructor(private readonly store: Store) {
    this.runSelect = h("select", { class: "run-select", "aria-label": "run", onchange: () => store.selectRun(this.runSelect.value) });
    this.live = h("span", { class: "live-state", "data-testid": "live-state" });
    this.info = h("span", { class: "run-info muted small" });
    this.problems = h("div", { class: "problems" });
    this.errors = h("div", { class: "error-bar", role: "alert" });
    this.el = h(
      "div",
      { class: "header-wrap" },
      h(
        "header",
        { class: "topbar" },
        h("span", { class: "brand" }, "TVM Debugger"),
        h("label", { class: "small muted" }, "run ", this.runSelect),
        this.info,
        h("span", { class: "spacer" }),
        this.live,
      ),
      this.completeness.el,
      this.problems,
      this.errors,
    );
    store.on("runs", () => this.render());
    store.on("run", () => this.render());
    store.on("error", () => this.renderErrors());
  }

  render(): void {
    const runs = this.store.runs;
    const current = this.store.run;
    if (this.runSelect.options.length !== runs.length || [...this.runSelect.options].some((o, i) => o.value !== runs[i]?.run)) {
      setChildren(
        this.runSelect,
        runs.map((r) => h("option", { value: r.run }, r.run)),
      );
    }
    if (current !== null) this.runSelect.value = current;
    const info = this.store.runInfo;
    setChildren(
      this.info,
      info
        ? `${info.tensor_debug_mode ?? "?"} · ${formatCount(info.num_executions)} calls · ${formatCount(info.num_traces)} kernel executions · ${formatCount(info.num_ops)} ops · TVM ${info.tvm_version ?? "?"}`
        : "",
    );
    const now = this.status?.now ?? Date.now() / 1000;
    const isLive = !!info?.live;
    this.live.className = `live-state ${isLive ? "is-live" : "is-static"}`;
    this.live.dataset.live = String(isLive);
    setChildren(
      this.live,
      h("span", { class: "live-dot" }),
      isLive ? "live" : "not live",
      h(
        "span",
        { class: "muted small" },
        info?.last_update_time ? ` · written ${formatAgo(now - info.last_update_time)}` : "",
        this.lastPoll ? ` · checked ${new Date(this.lastPoll).toLocaleTimeString()}` : "",
      ),
    );
    this.completeness.update(info?.completeness);
    const problems: string[] = [...(this.status?.problems ?? [])];
    if (this.status?.reader.error) problems.push(`reader: ${this.status.reader.error}`);
    const rs = this.status?.runs.find((r) => r.run === current);
    if (rs?.error) problems.push(`reading ${rs.run}: ${rs.error}`);
    if (rs && rs.num_corruptions > 0) {
      const c = rs.corruptions[0];
      problems.push(
        `${rs.num_corruptions} corrupt record${rs.num_corruptions === 1 ? "" : "s"} skipped${c ? ` (first: ${c.path} at byte ${c.offset}: ${c.message || c.reason})` : ""}`,
      );
    }
    setChildren(
      this.problems,
      problems.map((p) => h("div", { class: "problem" }, "⚠ ", p)),
    );
  }

  private renderErrors(): void {
    const errs = this.store.errors;
    setChildren(
      this.errors,
      errs.length
        ? [
            errs.map((e) => h("div", { class: "error-line", "data-testid": "backend-error" }, e.message)),
            h("button", { class: "small-btn", onclick: () => this.store.dismissErrors() }, "dismiss"),
          ]
        : null,
    );
  }
}
