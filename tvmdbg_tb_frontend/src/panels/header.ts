/** The top bar: run picker, live state, reader problems, and the backend's errors. */
import type { RunInfo, Status } from "../api";
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
  /** Shows or hides the keyboard shortcuts (set by render()). */
  onHelp: () => void = () => undefined;
  private readonly completeness = new CompletenessBanner();
  lastPoll = 0;

  constructor(private readonly store: Store) {
    this.runSelect = h("select", { class: "run-select", "aria-label": "run", onchange: () => store.pickRun(this.runSelect.value) });
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
        h("label", { class: "small muted run-picker" }, "run ", this.runSelect),
        this.info,
        h("span", { class: "spacer" }),
        h(
          "button",
          {
            class: "small-btn keys-btn",
            title: "keyboard shortcuts (?)",
            "aria-label": "keyboard shortcuts",
            onclick: () => this.onHelp(),
          },
          "⌨ ?",
        ),
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
    const labels = runLabels(runs);
    const options = [...this.runSelect.options];
    if (options.length !== runs.length || options.some((o, i) => o.value !== runs[i]?.run || o.textContent !== labels[i])) {
      setChildren(
        this.runSelect,
        runs.map((r, i) => h("option", { value: r.run, title: `${r.run}\n${(r.argv ?? []).join(" ")}` }, labels[i])),
      );
    }
    if (current !== null) this.runSelect.value = current;
    // Which run opens by default, and why (the CLI's rule: tvmdbg alerts LOGDIR shows the same).
    const reason = this.store.defaultRun !== null ? `opens by default: ${this.store.defaultRun}, ${this.store.defaultReason}` : "";
    this.runSelect.title = reason;
    this.runSelect.dataset.defaultRun = this.store.defaultRun ?? "";
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
    // The run shown first, then the logdir's (a logdir of many broken runs has a line for each:
    // the list scrolls within a few lines). With no runs the empty-logdir page lists the
    // logdir's problems itself: say them once.
    const problems: string[] = [];
    const rs = this.status?.runs.find((r) => r.run === current);
    if (rs?.error) problems.push(`reading ${rs.run}: ${rs.error}`);
    if (rs && rs.num_corruptions > 0) {
      const c = rs.corruptions[0];
      problems.push(
        `${rs.num_corruptions} corrupt record${rs.num_corruptions === 1 ? "" : "s"} skipped${c ? ` (first: ${c.path} at byte ${c.offset}: ${c.message || c.reason})` : ""}`,
      );
    }
    if (this.status?.reader.error) problems.push(`reader: ${this.status.reader.error}`);
    if (runs.length) problems.push(...(this.status?.problems ?? []));
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

/** A run as the picker shows it: the name the user gave it, its command line, mode, alerts
 * and start time, so a buggy and a fixed run of the same script can be told apart (the
 * directory name alone cannot). */
export function runLabel(r: RunInfo, jobArgv?: string[] | null): string {
  // A disco rank: "rank 1 of 2" and the job's script (rank 0 runs in the program's own
  // process; a worker's argv is the worker entrypoint's).
  const argv = (r.disco ? (jobArgv ?? (r.disco.rank === 0 ? r.argv : null)) : r.argv) ?? [];
  // Paths shortened to their last part so the flags that tell runs apart stay visible.
  let command = argv.length
    ? argv.map((a) => (a.includes("/") ? a.replace(/\/+$/, "").split("/").pop() || a : a)).join(" ")
    : r.disco
      ? ""
      : r.run;
  if (command.length > 80) command = `${command.slice(0, 79)}…`;
  if (r.disco) command = `rank ${r.disco.rank} of ${r.disco.world_size}${command ? ` · ${command}` : ""}`;
  const when = r.start_time ? new Date(r.start_time * 1000).toLocaleString("en-GB", { hour12: false }).replace(",", "") : "?";
  const alerts = `${formatCount(r.num_alerts)} alert${r.num_alerts === 1 ? "" : "s"}`;
  // tvmdbg.disco names a worker's run "rank k of n", which the label already says.
  const ownName = r.run_name && !(r.disco && r.run_name === `rank ${r.disco.rank} of ${r.disco.world_size}`);
  const name = ownName ? `${r.run_name} · ` : "";
  return `${name}${command} · ${r.tensor_debug_mode ?? "?"} · ${alerts} · ${when}${r.live ? " · live" : ""}`;
}

/** Labels for a list of runs, each one different: runs whose labels would be equal (two
 * runs of one script in the same second, a comparison's pair) also name their directory. */
export function runLabels(runs: RunInfo[]): string[] {
  const scripts = new Map(runs.filter((r) => r.disco?.rank === 0).map((r) => [r.disco!.job_id, r.argv]));
  const labels = runs.map((r) => runLabel(r, r.disco ? scripts.get(r.disco.job_id) : undefined));
  const seen = new Map<string, number>();
  for (const l of labels) seen.set(l, (seen.get(l) ?? 0) + 1);
  return labels.map((l, i) => ((seen.get(l) ?? 0) > 1 ? `${l} · ${runs[i].run}` : l));
}
