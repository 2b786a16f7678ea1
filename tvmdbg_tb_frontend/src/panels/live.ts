/** The Live panel: watchpoints, and pause / step / continue of a program started with
 * enable_dump_debug_info(..., live=True). Talks to the plugin's live/* routes, which relay to
 * the program (docs/routes.md#live). Polls the state every second while a run is selected, and
 * keeps a pause it shows alive (the program resumes on its own when no dashboard does). */
import type { KeepaliveAnswer } from "../api";
import { POST_HEADERS, uriEncode } from "../api";
import { h, setChildren } from "../dom";
import { formatCount } from "../format";
import type { PauseInfo, PausedTensor, Store } from "../store";

type Val = number | boolean | string;

interface TensorView {
  name: string;
  dtype?: string;
  shape?: number[];
  size?: number;
  values?: Val[];
  truncated?: boolean;
  note?: string;
  kind?: string;
  health?: { nan: number; neg_inf: number; pos_inf: number; zero: number; min: Val | null; max: Val | null; mean: Val | null };
}

interface Hit {
  watchpoint_id: number;
  op_id?: number;
  graph_id?: number;
  op_name: string;
  kernel: string;
  output_slot: number;
  execution_index: number;
  detail: string;
  description: string;
  paused: boolean;
}

interface Pause {
  pause_id: number;
  op_id: number;
  graph_id: number;
  op_name: string;
  kernel: string;
  function: string;
  execution_index: number;
  reason: string;
  hits: Hit[];
  inputs: TensorView[];
  outputs: TensorView[];
  source: { file_path: string; line: number; function: string; text: string; op_type: string } | null;
  original_ops: { op_type: string; var_name: string }[];
  call_traces?: number;
  call_row?: number | null;
}

interface Watchpoint {
  id: number;
  description: string;
  hits: number;
}

interface LiveState {
  live: boolean;
  reason?: string;
  pid?: number;
  paused?: boolean;
  pause?: Pause | null;
  mode?: string;
  watchpoints?: Watchpoint[];
  num_hits?: number;
  recent_hits?: Hit[];
  timeout?: number;
  events?: string[];
  /** The last requests that changed the program, with the ids the plugin gave them. */
  applied?: { request_id: string | null; route: string; action: string | null; time: number }[];
}

export const LIVE_POLL_MS = 1000;

async function call(
  route: string,
  run: string,
  method: "GET" | "POST",
  body?: unknown,
): Promise<{ status: number; data: Record<string, unknown> }> {
  const url = `${route}?run=${uriEncode(run)}`;
  const response = await fetch(url, {
    method,
    headers: method === "POST" ? POST_HEADERS : undefined,
    body: method === "POST" ? JSON.stringify(body ?? {}) : undefined,
  });
  let data: Record<string, unknown> = {};
  try {
    data = (await response.json()) as Record<string, unknown>;
  } catch {
    data = { error: `answer ${response.status} is not JSON` };
  }
  return { status: response.status, data };
}

function fmt(v: Val | null | undefined): string {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toPrecision(5);
  return String(v);
}

function tensorView(t: TensorView, role: string, k: number): HTMLElement {
  if (!t.dtype) return h("div", { class: "tensor" }, `${t.name}: ${t.kind ?? "?"}`);
  const health = t.health
    ? `nan=${t.health.nan} -inf=${t.health.neg_inf} +inf=${t.health.pos_inf} zero=${t.health.zero} min=${fmt(t.health.min)} max=${fmt(t.health.max)} mean=${fmt(t.health.mean)}`
    : "";
  return h(
    "div",
    { class: "tensor", "data-testid": `live-${role}`, "data-index": k },
    h("div", null, h("b", null, t.name), ` ${t.dtype}[${(t.shape ?? []).join(", ")}] `, h("span", { class: "muted" }, health)),
    t.values
      ? h(
          "div",
          { class: "tensor-values", "data-testid": `live-${role}-values` },
          `[${t.values.map(fmt).join(", ")}${t.truncated ? ", …" : ""}]`,
        )
      : h("div", { class: "muted" }, t.note ?? ""),
  );
}

export class LivePanel {
  readonly el: HTMLElement;
  private readonly status: HTMLElement;
  private readonly message: HTMLElement;
  private readonly controls: HTMLElement;
  private readonly watchList: HTMLElement;
  private readonly paused: HTMLElement;
  private readonly hits: HTMLElement;
  private readonly condition: HTMLSelectElement;
  private readonly threshold: HTMLInputElement;
  private readonly min: HTMLInputElement;
  private readonly max: HTMLInputElement;
  private readonly scope: HTMLSelectElement;
  private readonly scopeText: HTMLInputElement;
  private readonly runTo: HTMLInputElement;
  state: LiveState | null = null;
  /** The state request in flight (one at a time). */
  private polling: Promise<void> | null = null;
  /** Commands sent so far, and those not answered yet: a keepalive never races a command
   * (the pause it names may be over by the time it arrives: a request for nothing). */
  private commandsSent = 0;
  /** Commands answered 504 (withdrawn), by request id: shown if the program applied them. */
  private readonly withdrawn = new Map<string, string>();
  private commandsPending = 0;
  /** The watchpoint hits the dump of a run that is not live holds, and for which state of it. */
  private hitsFor: { key: string; hits: Hit[]; num: number } | null = null;
  /** Told whether the panel has something to show (the side column then gives it room). */
  onShape: (open: boolean) => void = () => undefined;

  constructor(private readonly store: Store) {
    this.status = h("div", { class: "live-status small", "data-testid": "live-status" }, "…");
    this.message = h("div", { class: "live-message small", "data-testid": "live-message", role: "alert" });
    this.condition = h(
      "select",
      { "data-testid": "wp-condition", "aria-label": "condition" },
      h("option", { value: "nan_or_inf" }, "NaN or Inf"),
      h("option", { value: "abs_above" }, "|value| >"),
      h("option", { value: "all_zero" }, "all zero"),
      h("option", { value: "value_range" }, "outside [min, max]"),
      h("option", { value: "changed" }, "changed by > %"),
    );
    this.threshold = h("input", { type: "number", placeholder: "threshold", "data-testid": "wp-threshold" });
    this.min = h("input", { type: "number", placeholder: "min", "data-testid": "wp-min" });
    this.max = h("input", { type: "number", placeholder: "max", "data-testid": "wp-max" });
    this.scope = h(
      "select",
      { "data-testid": "wp-scope", "aria-label": "scope" },
      h("option", { value: "all" }, "all ops"),
      h("option", { value: "regex" }, "ops matching"),
      h("option", { value: "op" }, "one op"),
    );
    this.scopeText = h("input", { type: "text", placeholder: "op / pattern", "data-testid": "wp-scope-text" });
    this.runTo = h("input", { type: "text", placeholder: "op name", "data-testid": "run-to-op" });
    const button = (label: string, testid: string, fn: () => void) =>
      h("button", { class: "small-btn", "data-testid": testid, onclick: fn }, label);
    this.controls = h(
      "div",
      { class: "live-row live-only" },
      button("Pause", "live-pause", () => void this.command("pause")),
      button("Continue", "live-continue", () => void this.command("continue")),
      button("Step", "live-step", () => void this.command("step")),
      button("Next hit", "live-next-hit", () => void this.command("next_hit")),
      button("Run to", "live-run-to", () => void this.command("run_to", this.runTo.value.trim())),
      this.runTo,
    );
    this.watchList = h("div", { "data-testid": "live-watchpoints" });
    this.paused = h("div", { "data-testid": "live-paused" });
    this.hits = h("div", { class: "small", "data-testid": "live-hits" });
    this.el = h(
      "section",
      { class: "panel live-panel", "data-panel": "live" },
      h("header", { class: "panel-head" }, h("h2", null, "Live"), this.status),
      h(
        "div",
        { class: "panel-body live-body" },
        this.message,
        this.controls,
        h(
          "div",
          { class: "live-row live-only" },
          this.condition,
          this.threshold,
          this.min,
          this.max,
          this.scope,
          this.scopeText,
          button("Add watchpoint", "wp-add", () => void this.addWatchpoint()),
        ),
        this.watchList,
        this.paused,
        this.hits,
      ),
    );
    store.on("run", () => void this.poll());
    setInterval(() => void this.poll(), LIVE_POLL_MS);
  }

  /** The first control of a live program (else the panel's status), for the keyboard. */
  focusTarget(): HTMLElement | null {
    return this.el.querySelector<HTMLElement>(".live-row:not([hidden]) button") ?? null;
  }

  private say(text: string): void {
    setChildren(this.message, text);
  }

  /** Reads the program's state (the request in flight, when there is one). */
  poll(): Promise<void> {
    if (this.polling === null) this.polling = this.readState().finally(() => (this.polling = null));
    return this.polling;
  }

  /** again: read once more when the pause just read is over by the time of its keepalive. */
  private async readState(again = true): Promise<void> {
    const run = this.store.run;
    if (run === null) return;
    const commands = this.commandsSent;
    try {
      const { status, data } = await call("live/state", run, "GET");
      this.state = status === 200 ? (data as unknown as LiveState) : { live: false, reason: String(data.error ?? status) };
      this.noteWithdrawnApplied(this.state);
      // Reading the state is not contact: while this panel shows a pause, keep it alive
      // explicitly, unless a command sent meanwhile may have ended it. It may be over all the
      // same (timed out, resumed by another dashboard): then this state is stale, read it again.
      const quiet = this.commandsPending === 0 && commands === this.commandsSent;
      if (this.state.pause && quiet) {
        const kept = await call("live/keepalive", run, "POST", { pause_id: this.state.pause.pause_id });
        const answer = kept.data as unknown as KeepaliveAnswer;
        if (again && kept.status === 200 && "over" in answer && answer.over) return this.readState(false);
      }
      if (!this.state.live) {
        // The program ended (or never was live): the dump still lists its watchpoint hits,
        // read again only when the dump grew.
        const info = this.store.runInfo;
        const key = `${run}|${info?.num_executions}|${info?.num_traces}|${info?.last_update_time}`;
        if (this.hitsFor?.key !== key) {
          const recorded = await call("live/hits", run, "GET");
          this.hitsFor =
            recorded.status === 200 ? { key, hits: (recorded.data.hits as Hit[]) ?? [], num: Number(recorded.data.num_hits ?? 0) } : null;
        }
        if (this.hitsFor) {
          this.state.recent_hits = this.hitsFor.hits;
          this.state.num_hits = this.hitsFor.num;
        }
      }
      this.render();
    } catch (err) {
      this.state = { live: false, reason: `cannot reach TensorBoard (${err instanceof Error ? err.message : String(err)})` };
      this.render();
    }
  }

  /** A command answered 504 is withdrawn: the program refuses it once its deadline passed. It
   * happened only if the program applied it just before freezing: then say so, and when. */
  private noteWithdrawnApplied(state: LiveState): void {
    for (const a of state.applied ?? []) {
      const action = a.request_id === null ? undefined : this.withdrawn.get(a.request_id);
      if (action === undefined || a.request_id === null) continue;
      this.withdrawn.delete(a.request_id);
      this.say(`"${action}" (answered 504) was applied at ${new Date(a.time * 1000).toLocaleTimeString()} after all`);
    }
  }

  private async command(action: string, opName?: string): Promise<void> {
    const run = this.store.run;
    if (run === null) return;
    this.commandsSent++;
    this.commandsPending++;
    try {
      await this.polling; // its keepalive, for the pause this command may end, arrives first
      const body: Record<string, unknown> = { action };
      if (this.state?.pause) body.pause_id = this.state.pause.pause_id;
      if (opName !== undefined) body.op_name = opName;
      const { status, data } = await call("live/command", run, "POST", body);
      if (status === 504 && data.withdrawn === true && typeof data.request_id === "string") {
        this.withdrawn.set(data.request_id, action); // watched for in the state's `applied`
      }
      this.say(status === 200 ? "" : String(data.error ?? `error ${status}`));
    } finally {
      this.commandsPending--;
    }
    await this.polling; // a state read while the command was on its way may be stale
    await this.poll();
  }

  private async addWatchpoint(): Promise<void> {
    const run = this.store.run;
    if (run === null) return;
    const body: Record<string, unknown> = { condition: this.condition.value };
    const num = (el: HTMLInputElement) => (el.value.trim() === "" ? undefined : Number(el.value));
    body.threshold = num(this.threshold);
    body.min = num(this.min);
    body.max = num(this.max);
    const text = this.scopeText.value.trim();
    if (this.scope.value === "regex") body.op_regex = text;
    if (this.scope.value === "op") body.op_name = text;
    const { status, data } = await call("live/watchpoints", run, "POST", body);
    this.say(status === 200 ? "" : String(data.error ?? `error ${status}`));
    await this.poll();
  }

  private async deleteWatchpoint(id: number): Promise<void> {
    const run = this.store.run;
    if (run === null) return;
    const { status, data } = await call("live/watchpoints/delete", run, "POST", { id });
    this.say(status === 200 ? "" : String(data.error ?? `error ${status}`));
    await this.poll();
  }

  render(): void {
    const s = this.state;
    const live = !!s?.live;
    this.el.dataset.live = String(live);
    this.el.dataset.paused = String(!!s?.paused);
    this.store.setPause(live && s?.pause ? pauseInfo(s.pause) : null);
    // Controls only for a program that answers (never a 404 for a run that is not live).
    for (const row of this.el.querySelectorAll<HTMLElement>(".live-row.live-only")) row.hidden = !live;
    this.status.dataset.paused = String(!!s?.paused);
    this.onShape(live || !!s?.num_hits);
    if (!s || !live) {
      setChildren(this.status, `not live: ${s?.reason ?? "no run"}`);
      setChildren(this.watchList);
      setChildren(this.paused);
      this.renderHits(s);
      return;
    }
    const p = s.pause;
    setChildren(
      this.status,
      p
        ? `paused at ${p.op_name} (pause #${p.pause_id})`
        : `running (pid ${s.pid}, ${s.mode === "next_hit" ? "stops at the next hit" : s.mode})`,
      ...(s.events ?? []).map((e) => h("div", { class: "muted small" }, e)),
    );
    setChildren(
      this.watchList,
      (s.watchpoints ?? []).map((w) =>
        h(
          "div",
          { class: "live-row small", "data-testid": "live-watchpoint" },
          `${w.description} · ${w.hits} hit${w.hits === 1 ? "" : "s"}`,
          h("button", { class: "small-btn", onclick: () => void this.deleteWatchpoint(w.id) }, "delete"),
        ),
      ),
    );
    if (p) {
      setChildren(
        this.paused,
        h(
          "div",
          { "data-testid": "live-paused-op" },
          h("b", null, p.op_name),
          ` kernel ${p.kernel} in ${p.function} · call #${p.execution_index} `,
          h(
            "button",
            {
              class: "small-btn",
              "data-testid": "live-show-op",
              title: "select it in the graph, the op details and the source",
              onclick: () => this.store.pause && void this.store.goToPause(this.store.pause),
            },
            "show",
          ),
        ),
        h("div", { class: "small" }, p.reason),
        p.original_ops.length
          ? h("div", { class: "small muted" }, "ops: ", p.original_ops.map((o) => `${o.op_type} -> ${o.var_name}`).join(", "))
          : null,
        p.source
          ? h(
              "div",
              { class: "live-source", "data-testid": "live-source" },
              h(
                "span",
                { class: "live-source-where", title: p.source.file_path },
                `${p.source.file_path.split("/").pop()}:${p.source.line}`,
              ),
              h("code", null, p.source.text.trim()),
            )
          : null,
        h("div", { class: "small" }, "inputs"),
        p.inputs.map((t, k) => tensorView(t, "input", k)),
        h("div", { class: "small" }, "outputs"),
        p.outputs.map((t, k) => tensorView(t, "output", k)),
      );
    } else {
      setChildren(this.paused);
    }
    this.renderHits(s);
  }

  private renderHits(s: LiveState | null): void {
    if (!s || !s.num_hits) {
      setChildren(this.hits);
      return;
    }
    setChildren(
      this.hits,
      h("div", { class: "muted" }, `${formatCount(s.num_hits ?? 0)} watchpoint hits`),
      h(
        "ol",
        { class: "hit-list" },
        (s.recent_hits ?? [])
          .slice(-10)
          .reverse()
          .map((hit) =>
            h(
              "li",
              null,
              h(
                "button",
                {
                  class: "alert-item hit-item",
                  "data-testid": "live-hit",
                  title: "show this kernel execution (list, graph, source)",
                  onclick: () => void this.goToHit(hit),
                },
                `#${hit.watchpoint_id} ${hit.op_name}:${hit.output_slot} (call ${hit.execution_index}) ${hit.detail}`,
              ),
            ),
          ),
      ),
    );
  }

  /** A watchpoint hit, like an alert: its kernel execution selected everywhere (once the dump
   * holds its call; the op alone before that). */
  private async goToHit(hit: Hit): Promise<void> {
    const run = this.store.run;
    if (run === null) return;
    try {
      let opId = hit.op_id;
      const page = await this.store.api.traces(run, 0, 1000, hit.execution_index);
      if (this.store.run !== run) return;
      const own = page.graph_executions.filter(
        (t) => (opId !== undefined ? t.op_id === opId : t.op_name === hit.op_name) && t.output_slot === hit.output_slot,
      );
      if (own.length) return await this.store.selectTrace(own[0].position, own[0].index);
      if (opId === undefined) {
        const found = await this.store.api.search(run, hit.op_name, 200, hit.graph_id);
        opId = found.matches.find((m) => m.op.op_name === hit.op_name)?.op.op_id;
      }
      if (opId !== undefined) await this.store.selectOp(opId);
    } catch (err) {
      this.store.reportError(err);
    }
  }
}

/** The pause as the other panels see it. */
function pauseInfo(p: Pause): PauseInfo {
  return {
    pauseId: p.pause_id,
    opId: p.op_id,
    graphId: p.graph_id,
    opName: p.op_name,
    kernel: p.kernel,
    functionName: p.function,
    executionIndex: p.execution_index,
    reason: p.reason,
    nonfinite: p.outputs.map((t, slot) => ({
      slot,
      nan: t.health?.nan ?? 0,
      negInf: t.health?.neg_inf ?? 0,
      posInf: t.health?.pos_inf ?? 0,
    })),
    source: p.source ? { file_path: p.source.file_path, line: p.source.line, function: p.source.function } : null,
    callTraces: p.call_traces ?? 0,
    callRow: p.call_row ?? null,
    inputs: p.inputs.map(pausedTensor),
    outputs: p.outputs.map(pausedTensor),
  };
}

/** A tensor of the pause as the other panels read it: its counts as a Health (the program
 * counts NaN, -∞, +∞ and zeros; negatives and positives are not counted). */
function pausedTensor(t: TensorView): PausedTensor {
  const hl = t.health;
  return {
    name: t.name,
    dtype: t.dtype ?? null,
    shape: t.shape ?? null,
    health: hl
      ? { nan: hl.nan, negInf: hl.neg_inf, posInf: hl.pos_inf, zero: hl.zero, negative: null, positive: null, size: t.size ?? null }
      : null,
  };
}
