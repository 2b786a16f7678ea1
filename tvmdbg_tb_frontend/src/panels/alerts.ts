/** Alerts: NaN/∞ counts per kind, the list of non-finite outputs, and the one click that
 * matters: jump to the first origin alert (the first op that made a non-finite value). */
import type { Alert, AlertsPage, RangeAlert, UnfinishedAlert } from "../api";
import { h, scrollWithin, setChildren } from "../dom";
import { formatCount, formatLocation, formatValue, hasLine, plural, stepText } from "../format";
import type { PauseInfo, Store } from "../store";
import { keepFocus, roving, setTabStop } from "../roving";
import { landOnInnerOp } from "./inner_ops";

/** Alerts fetched up front (for the timeline's marks); counts always cover every alert. */
const MAX_LISTED = 2000;
/** Alerts shown per page of the list. */
export const ALERTS_PER_PAGE = 200;

/** "relax.nn.softmax" -> "softmax". */
function shortOp(opType: string): string {
  return opType.slice(opType.lastIndexOf(".") + 1);
}

/** The non-finite outputs that are no alerts, in one line each kind (see docs/nonfinite.md). */
export function benignNote(page: AlertsPage): HTMLElement | null {
  const benign = page.benign;
  if (!benign || benign.ops.length === 0) return null;
  const lines: HTMLElement[] = [];
  for (const kind of ["absorbed", "expected"] as const) {
    const ops = benign.ops.filter((o) => o.kind === kind);
    if (!ops.length) continue;
    const made = [...new Set(ops.map((o) => (o.original_ops.length ? shortOp(o.original_ops[0]) : o.kernel)))];
    const readers = [...new Set(ops.flatMap((o) => o.absorbed_by.map(shortOp)))];
    const n = benign[kind];
    const what = `${formatCount(n)} non-finite output${n === 1 ? "" : "s"} (${made.join(", ")})`;
    const text =
      kind === "absorbed"
        ? `Intended masking: ${what}${readers.length ? ` absorbed by ${readers.join(", ")}` : ""}; no alerts.`
        : `Expected by ${JSON.stringify(benign.expected_nonfinite ?? "")}: ${what}; no alerts.`;
    const title = ops.map((o) => `${o.op_name} (${o.kernel}): ${formatCount(o.count)}`).join("\n");
    lines.push(h("div", { class: `benign-${kind}`, title }, text));
  }
  return h("div", { class: "benign-note muted small", "data-testid": "benign-note" }, ...lines);
}

/** The NaN/∞ of calls that never returned: only their watchpoint hits recorded them (the
 * program was killed, or is paused, inside the call), so they have no row to go to. */
export function unfinishedNote(page: AlertsPage): HTMLElement | null {
  const rows = page.unfinished ?? [];
  if (!rows.length) return null;
  return h(
    "div",
    { class: "alert-banner", "data-testid": "unfinished-alerts", role: "status" },
    `⚠ ${plural(rows.length, "non-finite output")} in calls that never returned (the program was killed, or is paused, inside them):`,
    h(
      "ul",
      null,
      rows.map((a: UnfinishedAlert) =>
        h(
          "li",
          null,
          h("b", null, a.op_name),
          ` (${a.kernel}) in call ${a.execution_index}: ${countsText(a)} at ${formatLocation(a.location)}`,
        ),
      ),
    ),
  );
}

export class AlertsPanel {
  readonly tabId = "alerts";
  readonly tabLabel = "Alerts";
  readonly el: HTMLElement;
  private readonly body: HTMLElement;
  private page: AlertsPage | null = null;
  /** The page of the list on screen (offset ALERTS_PER_PAGE * n). */
  private listPage: AlertsPage | null = null;
  private firstOrigin: Alert | undefined;
  private loadedFor = "";

  constructor(private readonly store: Store) {
    this.body = h("div", { class: "panel-body alerts-body" });
    this.el = h("section", { class: "panel alerts-panel", "data-panel": "alerts", "aria-label": "Alerts" }, this.body);
    store.on("run", () => void this.load());
    store.on("runs", () => void this.load());
    store.on("trace", () => this.render());
    store.on("pause", () => this.render());
  }

  private async load(): Promise<void> {
    const info = this.store.runInfo;
    const run = this.store.run;
    if (!info || run === null) {
      this.page = null;
      this.listPage = null;
      this.firstOrigin = undefined;
      this.loadedFor = "";
      return this.render();
    }
    // A live run can drop old alerts (circular buffer) without changing their count: reload.
    const key = `${run}|${info.num_alerts}|${info.num_range_alerts ?? 0}`;
    if (key === this.loadedFor && !info.live) return;
    if (!this.loadedFor.startsWith(`${run}|`)) {
      // Another run: never show the previous run's alerts (or its button) while this one loads.
      this.page = null;
      this.listPage = null;
      this.firstOrigin = undefined;
      this.render();
    }
    this.loadedFor = key;
    try {
      const page = await this.store.api.alerts(run, 0, Math.min(info.num_alerts, MAX_LISTED));
      if (this.store.run !== run) return;
      this.page = page;
      this.listPage = page;
      const fo = page.first_origin_index;
      this.firstOrigin = fo === null ? undefined : page.alerts[fo - page.begin];
      if (fo !== null && !this.firstOrigin) {
        const one = await this.store.api.alerts(run, fo, fo + 1);
        if (this.store.run !== run) return;
        this.firstOrigin = one.alerts[0];
      }
      this.store.alertExecutions = new Set(page.alerts.map((a) => a.execution_index));
      const fb = this.firstOrigin;
      this.store.firstBad = fb
        ? { executionIndex: fb.execution_index, executionPosition: fb.execution_position, tracePosition: fb.trace_position }
        : null;
      this.store.emit("alerts");
    } catch (err) {
      this.loadedFor = "";
      this.store.reportError(err);
    }
    this.render();
  }

  /** Shows the page of the list that starts at offset (clamped to the alerts). */
  async showPage(offset: number): Promise<void> {
    const run = this.store.run;
    const page = this.page;
    if (run === null || !page) return;
    const begin = Math.max(0, Math.min(offset, Math.max(0, page.num_alerts - 1)));
    try {
      const got = await this.store.api.alerts(run, begin, begin + ALERTS_PER_PAGE);
      if (this.store.run !== run) return;
      this.listPage = got;
    } catch (err) {
      this.store.reportError(err);
    }
    this.render();
  }

  /** Selects the alert's kernel execution (the list, graph, stack and source follow). */
  async goToAlert(alert: Alert): Promise<void> {
    const pos = alert.trace_position;
    if (pos === null) {
      this.store.reportError(new Error(`the execution of ${alert.op_name} for this alert is no longer in the dump (circular buffer)`));
      return;
    }
    landOnInnerOp(alert);
    await this.store.selectTrace(pos, alert.trace_index);
    const frame = alert.inner_op?.location;
    if (hasLine(frame)) this.store.showFrame({ file_path: frame.file_path, file_index: -1, line: frame.line, function: frame.function });
  }

  /** The list's current alert (its Tab stop), else the first origin button: where the
   * keyboard's jump to this panel lands. */
  focusTarget(): HTMLElement | null {
    return (
      this.body.querySelector<HTMLElement>(".alert-item[tabindex='0']") ??
      this.body.querySelector<HTMLElement>("[data-testid=first-origin-alert]:not([disabled])")
    );
  }

  /** The next (delta 1) or previous (-1) alert after the selected one, selected, with the
   * focus on it (the keyboard's n / p); across pages of the list. */
  async step(delta: number): Promise<void> {
    const page = this.listPage ?? this.page;
    if (!page || page.num_alerts === 0) return;
    const listed = page.alerts.slice(0, ALERTS_PER_PAGE);
    const selected = this.store.trace;
    const at = selected ? listed.findIndex((a) => a.trace_index === selected.index) : -1;
    let target: Alert | undefined;
    if (at < 0) target = delta > 0 ? listed[0] : listed[listed.length - 1];
    else if (at + delta >= 0 && at + delta < listed.length) target = listed[at + delta];
    else {
      const offset = page.begin + at + delta;
      if (offset < 0 || offset >= page.num_alerts) return;
      await this.showPage(offset - (offset % ALERTS_PER_PAGE));
      const next = this.listPage;
      target = next?.alerts[offset - next.begin];
    }
    if (!target) return;
    await this.goToAlert(target);
    this.body.querySelector<HTMLElement>(".alert-item.selected")?.focus();
  }

  private render(): void {
    const page = this.page;
    const paused = this.pausedAlert(this.store.pause);
    if (!page || page.num_alerts === 0) {
      const note = page ? benignNote(page) : null;
      const unfinished = page ? unfinishedNote(page) : null;
      // Paused at a NaN the dump does not hold yet: never "none recorded" under it.
      const text = !page
        ? "—"
        : paused
          ? "No NaN or ∞ in the dump yet: the paused call is written when it returns."
          : note || unfinished
            ? "No NaN or ∞ alert in the dump's calls."
            : "No NaN or ∞ recorded.";
      const none = h("div", { class: "no-alerts" }, unfinished || paused ? null : h("span", { class: "ok-dot" }), text);
      setChildren(this.body, paused, unfinished, none, note, this.rangeSection());
      return;
    }
    const list = this.listPage ?? page;
    const listed = list.alerts.slice(0, ALERTS_PER_PAGE);
    const first = this.firstOrigin;
    const from = list.begin;
    const to = list.begin + listed.length;
    const selected = this.store.trace;
    const listEl = h(
      "ol",
      { class: "alert-list", "aria-label": "alerts (arrow keys move, Enter selects; n / p: next / previous alert)" },
      listed.map((a) => {
        const isSelected = selected ? a.trace_index === selected.index : a.trace_position === this.store.tracePosition;
        return h(
          "li",
          null,
          h(
            "button",
            {
              class: `alert-item${a.origin ? " origin" : ""}${isSelected ? " selected" : ""}`,
              "aria-current": isSelected ? "true" : null,
              "data-key": `alert${a.trace_index}.${a.output_slot}${a.masked ? "m" : ""}`,
              onclick: () => void this.goToAlert(a),
              title: `execution ${a.execution_index} (${alertCallText(a)}), trace ${a.trace_index}`,
            },
            h("span", { class: "alert-op" }, a.op_name, a.output_slot ? `:${a.output_slot}` : ""),
            a.origin ? h("span", { class: "badge origin-badge" }, a.origin_uncertain ? "origin?" : "origin") : null,
            a.masked ? h("span", { class: "badge inside-badge", title: innerOpText(a) }, "inside") : null,
            h("span", { class: "muted small" }, ` ${alertCallText(a)} · `, countsText(a)),
          ),
        );
      }),
    );
    const items = [...listEl.querySelectorAll<HTMLElement>(".alert-item")];
    setTabStop(items, items.find((i) => i.classList.contains("selected")) ?? null);
    roving(listEl, ".alert-item", "vertical");
    keepFocus(this.body, () =>
      setChildren(
        this.body,
        paused,
        unfinishedNote(page),
        h(
          "button",
          {
            class: "alert-summary",
            "data-testid": "first-origin-alert",
            "data-key": "first-origin", // keepFocus: Enter on it keeps the focus there across the re-render
            title: "Go to the first kernel that produced a non-finite value",
            disabled: !first,
            onclick: () => first && void this.goToAlert(first),
          },
          h(
            "div",
            { class: "alert-total" },
            h("span", { class: "alert-icon" }, "⚠"),
            `${formatCount(page.num_alerts)} NaN/∞ alert${page.num_alerts === 1 ? "" : "s"}`,
          ),
          h(
            "div",
            { class: "alert-kinds" },
            h(
              "span",
              { class: "kind kind-nan", "data-kind": "nan", title: "alerts whose output holds NaN" },
              `with NaN ${formatCount(page.nan_alerts)}`,
            ),
            h(
              "span",
              { class: "kind kind-neg-inf", "data-kind": "neg-inf", title: "alerts whose output holds -∞" },
              `with -∞ ${formatCount(page.neg_inf_alerts)}`,
            ),
            h(
              "span",
              { class: "kind kind-pos-inf", "data-kind": "pos-inf", title: "alerts whose output holds +∞" },
              `with +∞ ${formatCount(page.pos_inf_alerts)}`,
            ),
          ),
          first
            ? h(
                "div",
                { class: "alert-first" },
                "First origin: ",
                h("b", null, first.op_name),
                ` (${first.kernel}) at ${formatLocation(first.location)}`,
                h("div", { class: "small", "data-testid": "origin-words" }, originWords(first)),
                first.inner_op ? h("div", { class: "muted small", "data-testid": "first-inner-op" }, innerOpText(first)) : null,
                first.origin_uncertain
                  ? h(
                      "div",
                      { class: "problem", "data-testid": "origin-uncertain" },
                      "⚠ uncertain: records near it are damaged or missing; the true origin may be among them",
                    )
                  : null,
              )
            : h(
                "div",
                { class: "muted" },
                page.start_dropped ? "no origin found in what the dump still holds" : "no origin found",
                listed.length ? h("div", { class: "small", "data-testid": "origin-words" }, originWords(listed[0])) : null,
              ),
        ),
        page.start_dropped
          ? h(
              "div",
              { class: "alert-banner", "data-testid": "start-dropped", role: "status" },
              "The circular buffer dropped the start of this run: the first bad values may be gone. ",
              "Rerun with ",
              h("code", null, "circular_buffer_size=-1"),
              " to keep every record.",
            )
          : null,
        h("div", { class: "muted small" }, `${plural(page.origin_alerts, "origin alert")}; the others passed a bad value on.`),
        page.num_alerts > ALERTS_PER_PAGE
          ? h(
              "div",
              { class: "alert-pager", "data-testid": "alert-pager" },
              h(
                "button",
                { disabled: from === 0, onclick: () => void this.showPage(from - ALERTS_PER_PAGE), title: "previous alerts" },
                "‹",
              ),
              h("span", { class: "muted small" }, `${formatCount(from + 1)}–${formatCount(to)} of ${formatCount(page.num_alerts)}`),
              h("button", { disabled: to >= page.num_alerts, onclick: () => void this.showPage(to), title: "next alerts" }, "›"),
            )
          : null,
        benignNote(page),
        listEl,
        this.rangeSection(),
      ),
    );
    // The selected alert (an alert click, a kernel chosen elsewhere) is brought into view.
    const current = this.body.querySelector<HTMLElement>(".alert-item.selected");
    if (current) scrollWithin(this.body, current);
  }

  /** Where a live program is paused with a non-finite output: the first thing to look at,
   * though the dump holds the call only once it returns. */
  private pausedAlert(pause: PauseInfo | null): HTMLElement | null {
    const bad = pause?.nonfinite.filter((o) => o.nan || o.negInf || o.posInf) ?? [];
    if (!pause || !bad.length) return null;
    const counts = bad
      .map((o) => {
        const parts = [
          o.nan ? `NaN ${formatCount(o.nan)}` : "",
          o.negInf ? `-∞ ${formatCount(o.negInf)}` : "",
          o.posInf ? `+∞ ${formatCount(o.posInf)}` : "",
        ];
        return `output ${o.slot}: ${parts.filter(Boolean).join(", ")}`;
      })
      .join("; ");
    return h(
      "button",
      {
        class: "alert-item paused-alert",
        "data-testid": "paused-alert",
        title: "the program is paused after this kernel; the dump holds its call once the call returns",
        onclick: () => void this.store.goToPause(pause),
      },
      h("span", { class: "badge paused-badge" }, "paused"),
      h("span", { class: "alert-op" }, pause.opName),
      h("span", { class: "muted small" }, ` call ${pause.executionIndex} · ${counts} (live, not yet in the dump)`),
    );
  }

  /** Range alerts (FULL_STATS): outputs heading for overflow, listed by first call. */
  private rangeSection(): HTMLElement | null {
    const ranges = this.page?.range_alerts;
    if (!ranges || ranges.num_alerts === 0) return null;
    const n = ranges.num_alerts;
    return h(
      "div",
      { class: "range-alerts", "data-testid": "range-alerts" },
      h(
        "div",
        {
          class: "range-total",
          title: `abs-max within ${ranges.headroom}x of the dtype's largest value, or growing more than ${ranges.growth_factor}x per call toward it`,
        },
        `▲ ${formatCount(n)} range alert${n === 1 ? "" : "s"}: heading for overflow`,
      ),
      h(
        "ol",
        { class: "alert-list" },
        ranges.alerts.map((a) =>
          h(
            "li",
            null,
            h(
              "button",
              {
                class: `alert-item range-item${a.trace_position === this.store.tracePosition ? " selected" : ""}`,
                onclick: () => void this.store.selectTrace(a.trace_position, a.trace_index),
                title: `${a.dtype}, execution ${a.execution_index}, trace ${a.trace_index}, at ${formatLocation(a.location)}`,
              },
              h("span", { class: "alert-op" }, a.op_name, a.output_slot ? `:${a.output_slot}` : ""),
              h("span", { class: "badge range-badge" }, a.kind === "growth" ? "growth" : "near max"),
              h("span", { class: "muted small" }, ` exec ${a.execution_index} · `, rangeText(a)),
            ),
          ),
        ),
      ),
    );
  }
}

function rangeText(a: RangeAlert): string {
  if (a.kind === "growth" && a.growth !== null) return `${a.dtype} ${formatValue(a.abs_max)} (${a.growth.toPrecision(3)}x per call)`;
  return `${a.dtype} ${formatValue(a.abs_max)} (${(100 * a.fraction_of_max).toPrecision(2)}% of ${formatValue(a.dtype_max)})`;
}

/** Which op inside the fused kernel made the value, and how that is known. */
export function innerOpText(a: Alert): string {
  const op = a.inner_op;
  if (!op) return a.masked ? "made inside the fused kernel, hidden by its output (its inputs were not finite)" : "";
  const how = a.confirmed === "inner_check" ? "counted by the kernel" : `confirmed by ${a.confirmed ?? "?"}`;
  const hidden = a.masked ? ", hidden by the kernel's output" : "";
  return `made inside by ${op.op_type} ${op.var_name} (${how}${hidden})`;
}

function countsText(a: Alert | UnfinishedAlert): string {
  const parts: string[] = [];
  if (a.nan_count) parts.push(`NaN ${formatCount(a.nan_count)}`);
  if (a.neg_inf_count) parts.push(`-∞ ${formatCount(a.neg_inf_count)}`);
  if (a.pos_inf_count) parts.push(`+∞ ${formatCount(a.pos_inf_count)}`);
  return parts.join(", ");
}

/** Which call an alert is in, as the CLI says it: "decode · step 14" (its execution index when
 * the dump has no step). */
export function alertCallText(a: Pick<Alert, "function_name" | "call" | "vm" | "function_vms" | "execution_index">): string {
  if (!a.function_name) return `exec ${a.execution_index}`;
  if (!a.call) return `${a.function_name} · exec ${a.execution_index}`;
  return stepText(a.function_name, a.call, a.vm ?? 0, a.function_vms ?? 1);
}

/** The origin in words, as `tvmdbg check` says it: which call, and what made the value there
 * (the weight it read by name, or the op itself from finite inputs); for an alert that is no
 * origin, what it read instead (the caller's data, a weight, state of unknown health). */
export function originWords(
  a: Pick<Alert, "origin" | "bad_parameters" | "state" | "function_name" | "call" | "vm" | "function_vms" | "execution_index">,
): string {
  const where = `In ${alertCallText(a)}: `;
  const bad = a.bad_parameters ?? [];
  const weights = bad.filter((p) => p.weight).map((p) => p.name);
  const data = bad.filter((p) => !p.weight).map((p) => p.name);
  const state = a.state ?? [];
  if (a.origin) {
    const made = weights.length
      ? `the first op to read the weight ${weights.join(", ")}, which held NaN/∞`
      : "this op made the value from finite inputs";
    const later = state.length ? `; later calls read it back from ${state.join(", ")} (state), and are no origins` : "";
    return where + made + later + ".";
  }
  if (data.length) return `${where}it came in through the function's input ${data.join(", ")} (the caller's data).`;
  if (weights.length) return `${where}it came in through the weight ${weights.join(", ")}, already bad.`;
  if (state.length) return `${where}it read ${state.join(", ")}, state an earlier call wrote.`;
  return `${where}it read a value that was already bad.`;
}
