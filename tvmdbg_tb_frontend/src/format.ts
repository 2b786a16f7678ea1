/** Pure formatting and classification helpers shared by the panels (unit-tested). */
import type { LineLocation, Location, Num, StackFrame, TraceData } from "./api";

/** A JSON number as the backend encodes it ("NaN", "Infinity", "-Infinity") to a JS number. */
export function toNumber(v: Num | null | undefined): number {
  if (v === null || v === undefined) return NaN;
  if (typeof v === "number") return v;
  if (v === "Infinity") return Infinity;
  if (v === "-Infinity") return -Infinity;
  return NaN;
}

/** Counts of one tensor's elements by kind; -1 means "unknown" (CURT_HEALTH knows only "any"). */
export interface Health {
  nan: number;
  negInf: number;
  posInf: number;
  negative: number | null;
  zero: number | null;
  positive: number | null;
  size: number | null;
}

/** The health of a trace from its named summary (FULL_HEALTH, CONCISE_HEALTH) or its digest counts. */
export function healthOf(t: Pick<TraceData, "nan" | "neg_inf" | "pos_inf"> & { summary?: Record<string, unknown> }): Health {
  const s = t.summary ?? {};
  const n = (k: string): number | null => (typeof s[k] === "number" ? (s[k] as number) : null);
  return {
    nan: n("nan") ?? t.nan,
    negInf: n("neg_inf") ?? t.neg_inf,
    posInf: n("pos_inf") ?? t.pos_inf,
    negative: n("negative"),
    zero: n("zero"),
    positive: n("positive"),
    size: n("size"),
  };
}

/** The health of a tensor summary (an execution's input or output), from its named fields. */
export function summaryHealth(s: { summary: Record<string, unknown> }): Health {
  return healthOf({ nan: 0, neg_inf: 0, pos_inf: 0, summary: s.summary });
}

export function isNonFinite(h: Health): boolean {
  return h.nan !== 0 || h.negInf !== 0 || h.posInf !== 0;
}

/** One coloured segment of a health pill. */
export interface PillSegment {
  kind: "nan" | "neg-inf" | "pos-inf" | "negative" | "zero" | "positive";
  label: string;
  count: number;
}

const SEGMENTS: [PillSegment["kind"], string, keyof Health][] = [
  ["nan", "NaN", "nan"],
  ["neg-inf", "-∞", "negInf"],
  ["pos-inf", "+∞", "posInf"],
  ["negative", "neg", "negative"],
  ["zero", "zero", "zero"],
  ["positive", "pos", "positive"],
];

/** The pill's segments in their fixed order (NaN, -∞, +∞, -, 0, +), skipping unknown counts. */
export function pillSegments(h: Health): PillSegment[] {
  const out: PillSegment[] = [];
  for (const [kind, label, key] of SEGMENTS) {
    const count = h[key];
    if (count === null || count === undefined) continue;
    out.push({ kind, label, count });
  }
  return out;
}

/** "NaN 3 · -∞ 0 · ..." for a tooltip or a screen reader; "?" for unknown counts. */
export function healthText(h: Health): string {
  return pillSegments(h)
    .map((s) => `${s.label} ${s.count < 0 ? "?" : formatCount(s.count)}`)
    .join(" · ");
}

/** 1234567 -> "1,234,567"; negatives (unknown) -> "?". */
export function formatCount(n: number): string {
  if (n < 0) return "?";
  return Math.round(n).toLocaleString("en-US");
}

/** Microseconds to a short human string: 850 ns, 12.3 µs, 4.56 ms, 1.23 s. */
/** "decode · step 14": a call by its function and the step its VM counted (the CLI's "(decode,
 * call 14)"); the function alone when the dump has no number; " · VM 2" when several VMs
 * called it (each counts its own steps). */
export function stepText(functionName: string, step: number | null | undefined, vm = 0, vms = 1): string {
  const numbered = step ? `${functionName} · step ${step}` : functionName;
  return vms > 1 && vm ? `${numbered} · VM ${vm}` : numbered;
}

export function formatDuration(us: number | null | undefined): string {
  if (us === null || us === undefined || !Number.isFinite(us)) return "—";
  if (us < 1) return `${Math.round(us * 1000)} ns`;
  if (us < 1000) return `${us < 10 ? us.toFixed(2) : us < 100 ? us.toFixed(1) : us.toFixed(0)} µs`;
  if (us < 1e6) return `${(us / 1000).toFixed(us < 1e4 ? 2 : 1)} ms`;
  return `${(us / 1e6).toFixed(2)} s`;
}

/** [2, 3] -> "(2, 3)"; a scalar -> "()"; -1 (symbolic) -> "?". */
export function formatShape(shape: number[] | null | undefined): string {
  if (!shape) return "";
  return `(${shape.map((d) => (d < 0 ? "?" : String(d))).join(", ")}${shape.length === 1 ? "," : ""})`;
}

/** A value of a tensor: NaN/±Inf spelled out, floats in a compact form. */
export function formatValue(v: unknown): string {
  if (v === "NaN" || v === "Infinity" || v === "-Infinity") return v === "Infinity" ? "+Inf" : v === "-Infinity" ? "-Inf" : "NaN";
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-4 || a >= 1e6)) return v.toExponential(4);
  return String(Number(v.toPrecision(6)));
}

export function isNonFiniteValue(v: unknown): boolean {
  return v === "NaN" || v === "Infinity" || v === "-Infinity" || (typeof v === "number" && !Number.isFinite(v));
}

/** Whether a location names a Python line (an ONNX node alone does not). */
export function hasLine(loc: Location | null | undefined): loc is LineLocation {
  return !!loc && typeof loc.file_path === "string" && loc.file_path !== "" && typeof loc.line === "number";
}

/** "file.py:12" with only the file's base name; an ONNX node where no line exists; the
 * user's own call next to a library's line ("modeling_gpt2.py:213, called from run.py:8"). */
export function formatLocation(loc: Location | null | undefined): string {
  if (!loc) return "no source location";
  const parts: string[] = [];
  if (hasLine(loc)) parts.push(`${baseName(loc.file_path)}:${loc.line}`);
  const node = loc.model_node;
  if (node && (node.format === "onnx" || parts.length === 0)) {
    parts.push(`${node.format === "onnx" ? "ONNX" : node.format} node ${node.name} (${node.op_type})`);
  }
  if (hasLine(loc.called_from)) parts.push(`called from ${baseName(loc.called_from.file_path)}:${loc.called_from.line}`);
  return parts.join(", ") || "no source location";
}

export function baseName(path: string): string {
  const i = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  return i >= 0 ? path.slice(i + 1) : path;
}

const LIBRARY_MARKERS = ["/site-packages/", "/dist-packages/", "/tvmdbg_tb/", "<frozen", "/lib/python3", "/python3.", "\\lib\\"];

/** True for a frame of the user's own code (not a library, not the standard library). */
export function isUserFrame(f: Pick<StackFrame, "file_path">): boolean {
  const p = f.file_path;
  if (!p || p.startsWith("<")) return false;
  return !LIBRARY_MARKERS.some((m) => p.includes(m));
}

/**
 * Orders a creation stack (outermost first, as recorded) for display: the user's frames first,
 * innermost first, then the library frames, innermost first. Each keeps its depth.
 */
export function orderFrames(frames: StackFrame[]): { frame: StackFrame; user: boolean; depth: number }[] {
  const rows = frames.map((frame, depth) => ({ frame, user: isUserFrame(frame), depth })).reverse();
  return [...rows.filter((r) => r.user), ...rows.filter((r) => !r.user)];
}

/**
 * A default slice that shows a tensor as at most a 2-D table: index 0 on every leading
 * dimension ("0,0" for shape [2, 3, 4, 5]); "" when the tensor has 2 dims or fewer.
 */
export function defaultSlice(shape: number[]): string {
  if (shape.length <= 2) return "";
  return Array(shape.length - 2)
    .fill("0")
    .join(",");
}

/** Wall time (s since the epoch) as a local HH:MM:SS.mmm. */
export function formatClock(wallTime: number | null | undefined): string {
  if (wallTime === null || wallTime === undefined || !Number.isFinite(wallTime)) return "—";
  const d = new Date(wallTime * 1000);
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** "3 s ago", "5 min ago" for a status line. */
export function formatAgo(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return "just now";
  if (seconds < 60) return `${Math.round(seconds)} s ago`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
  return `${Math.round(seconds / 3600)} h ago`;
}

/** Sorts rows by a key, numbers numerically (NaN last), strings naturally; stable. */
export function sortRows<T>(rows: T[], key: keyof T, descending: boolean): T[] {
  const dir = descending ? -1 : 1;
  return rows
    .map((row, i) => ({ row, i }))
    .sort((a, b) => {
      const x = a.row[key] as unknown;
      const y = b.row[key] as unknown;
      let c: number;
      if (typeof x === "number" && typeof y === "number") {
        if (Number.isNaN(x) || Number.isNaN(y)) c = Number.isNaN(x) ? (Number.isNaN(y) ? 0 : 1) : -1;
        else c = dir * (x - y);
        if (Number.isNaN(x) !== Number.isNaN(y)) return c; // NaN last in both directions
      } else {
        c = dir * String(x).localeCompare(String(y), undefined, { numeric: true });
      }
      return c !== 0 ? c : a.i - b.i;
    })
    .map((r) => r.row);
}

/** Parses "go to index" input: a non-negative integer within [0, total); null otherwise. */
export function parseIndex(text: string, total: number): number | null {
  const t = text.trim().replace(/[,_\s]/g, "");
  if (!/^\d+$/.test(t)) return null;
  const n = Number(t);
  return n < total ? n : null;
}

/** A Relax shape expression as a user reads it: `R.shape([T.int64(1437), 10])` style integer
 * wrappers (`T.int64(1437)`) become their value (1437); symbolic names stay. */
export function formatShapeExpr(expr: string): string {
  return expr.replace(/T\.u?int(?:8|16|32|64)\((-?\d+)\)/g, "$1");
}

/** "1 element", "3 elements", "1,200 calls": a count with its noun. */
export function plural(n: number, noun: string, nouns = `${noun}s`): string {
  return `${formatCount(n)} ${n === 1 ? noun : nouns}`;
}
