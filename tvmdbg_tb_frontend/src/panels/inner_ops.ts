/** The Relax ops inside a fused kernel as its replay saw them (docs/routes.md#replays): each
 * inner op coloured by its replayed output health, the one that made the NaN/Inf marked, and
 * the inner op an alert named selected (the alert "lands" on it). A small section of the op
 * view; the graph panel's layout is not touched. */
import type { Alert, Location } from "../api";
import { h } from "../dom";
import { formatLocation, hasLine } from "../format";
import type { Store } from "../store";

export interface InnerOp {
  index: number;
  op_type: string;
  var_name: string;
  prim_func: string;
  location: Location | null;
  input_refs: number[];
  health: "finite" | "nonfinite" | "unknown";
  origin: boolean;
}

/** A kernel input's health in a replay (the mode's debug values by name: counts, dtype, shape). */
export interface ReplaySummary {
  dtype?: string;
  size?: number;
  nan?: number;
  neg_inf?: number;
  pos_inf?: number;
  [field: string]: number | string | boolean | number[] | undefined;
}

export interface Replay {
  execution_index: number;
  op_id: number;
  kernel: string;
  trigger: string;
  error: string | null;
  note: string | null;
  first_nonfinite_op: number | null;
  inputs: { summary: ReplaySummary }[];
  ops: InnerOp[];
}

/** What an inner op reads and how healthy each operand was in the replay. */
function readsText(replay: Replay, op: InnerOp, names: string[]): string {
  const parts = op.input_refs.map((ref) => {
    if (ref >= 0) return `${names[ref] ?? replay.ops[ref]?.var_name ?? `op ${ref}`} (${replay.ops[ref]?.health ?? "unknown"})`;
    if (ref <= -1_000_000) return "a constant";
    const s = replay.inputs[-1 - ref]?.summary ?? {};
    const bad = (s.nan ?? 0) + (s.neg_inf ?? 0) + (s.pos_inf ?? 0);
    return `kernel input ${-1 - ref} (${s.size === undefined ? "unknown" : bad ? "nonfinite" : "finite"})`;
  });
  return parts.length ? `reads ${parts.join(", ")}` : "reads nothing";
}

/** The inner op the last clicked alert named: (op id, execution index, inner op index). */
let landed: { opId: number; execution: number; index: number } | null = null;

/** Called when an alert is clicked, before its trace is selected. */
export function landOnInnerOp(alert: Alert & { inner_op?: { index: number } | null }): void {
  landed = alert.inner_op ? { opId: alert.op_id, execution: alert.execution_index, index: alert.inner_op.index } : null;
}

/** The section for one op (empty when the op was never replayed). */
export function innerOpsSection(store: Store, opId: number, execution: number | null): HTMLElement {
  const el = h("div", { class: "inner-ops", "data-testid": "inner-ops" });
  if (!store.run) return el;
  void store.api
    .get<{ replays: Replay[] }>("replays", { run: store.run, op_id: opId })
    .then((page) => {
      const replays = page.replays;
      const replay = replays.find((r) => r.execution_index === execution) ?? (replays.length ? replays[replays.length - 1] : undefined);
      if (replay) el.append(...render(store, replay));
    })
    .catch((err) => store.reportError(err));
  return el;
}

/** The name each replayed op has in the kernel's list of original Relax ops (the replay names
 * the fused function's own bindings, e.g. its last one `gv`): the k-th replayed op of a type
 * is the k-th original op of that type. */
export function originalNames(
  replayOps: { op_type: string; var_name: string }[],
  originals: { op_type: string; var_name: string }[],
): string[] {
  const used = new Map<string, number>();
  return replayOps.map((op) => {
    const k = used.get(op.op_type) ?? 0;
    used.set(op.op_type, k + 1);
    const same = originals.filter((o) => o.op_type === op.op_type);
    return same[k]?.var_name ?? op.var_name;
  });
}

function render(store: Store, replay: Replay): HTMLElement[] {
  const chosen = landed && landed.opId === replay.op_id && landed.execution === replay.execution_index ? landed.index : null;
  const names = originalNames(replay.ops, store.op?.op_id === replay.op_id ? store.op.original_ops : []);
  const head = h(
    "div",
    { class: "muted small" },
    `Replayed op by op in execution ${replay.execution_index} (${replay.trigger})`,
    replay.error ? `: not replayed, ${replay.error}` : "",
  );
  const list = h(
    "ol",
    { class: "inner-op-list" },
    replay.ops.map((op, i) =>
      h(
        "li",
        {
          class: `inner-op health-${op.health}${op.origin ? " origin" : ""}${op.index === chosen ? " selected" : ""}`,
          "data-testid": "inner-op",
          "data-inner-index": String(op.index),
          "data-health": op.health,
          title: `${readsText(replay, op, names)}${names[i] !== op.var_name ? ` (named ${op.var_name} inside the fused function)` : ""}`,
          onclick: () =>
            hasLine(op.location) &&
            store.showFrame({ file_path: op.location.file_path, file_index: -1, line: op.location.line, function: op.location.function }),
        },
        h("code", null, `${names[i]} = ${op.op_type}`),
        op.origin ? h("span", { class: "badge origin-badge" }, "made NaN/∞") : null,
        h("span", { class: "muted small" }, `  ${op.health} · ${formatLocation(op.location)}`),
        h("div", { class: "muted small inner-op-reads" }, readsText(replay, op, names)),
      ),
    ),
  );
  return [head, list];
}
