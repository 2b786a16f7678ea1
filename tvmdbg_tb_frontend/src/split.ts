/**
 * Resizable panes: two panes and a gutter between them, side by side ("row") or stacked
 * ("column"). The user drags the gutter (or focuses it and presses the arrow keys; a double
 * click restores the default) and the share of the first pane is remembered in localStorage,
 * so a layout fitted to one screen stays that way. Each pane keeps a minimum size in pixels:
 * at any window size both stay usable, and the page itself never scrolls.
 */
import { h } from "./dom";

export const GUTTER_PX = 6;
/** Versioned: sizes saved for an earlier arrangement of the panes are not applied to this one. */
const STORAGE_PREFIX = "tvmdbg.layout.v2.";

export interface SplitOptions {
  /** Name under which the user's size is remembered. */
  key: string;
  /** "row": panes side by side; "column": stacked. */
  direction: "row" | "column";
  /** Default size of the first pane: a fraction of the split, or a function of the split's
   * size in pixels (e.g. a side column of clamp(220 px, 22 %, 340 px)). */
  initial: number | ((totalPx: number) => number);
  minFirst: number;
  minSecond: number;
}

/** The first pane's share, kept within [0, 1] and so that both panes keep their minimum
 * sizes when the split is large enough for both (else each gets a share of what there is). */
export function clampFraction(fraction: number, totalPx: number, minFirst: number, minSecond: number): number {
  const f = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0.5;
  const space = totalPx - GUTTER_PX;
  if (space <= 0) return f;
  if (minFirst + minSecond > space) return minFirst / (minFirst + minSecond);
  return Math.min((space - minSecond) / space, Math.max(minFirst / space, f));
}

function load(key: string): number | null {
  try {
    const raw = window.localStorage?.getItem(STORAGE_PREFIX + key);
    const value = raw === null || raw === undefined ? NaN : Number(raw);
    return Number.isFinite(value) && value > 0 && value < 1 ? value : null;
  } catch {
    return null; // storage blocked (privacy settings): sizes are not remembered
  }
}

function save(key: string, fraction: number | null): void {
  try {
    if (fraction === null) window.localStorage?.removeItem(STORAGE_PREFIX + key);
    else window.localStorage?.setItem(STORAGE_PREFIX + key, fraction.toFixed(4));
  } catch {
    /* storage blocked: the size holds for this page only */
  }
}

export class Split {
  readonly el: HTMLElement;
  readonly gutter: HTMLElement;
  /** The user's share of the first pane (null: the default). */
  private chosen: number | null;
  /** A size for the first pane while a view needs it (not remembered; null: none). */
  private transient: ((totalPx: number) => number) | null = null;
  private collapsed = false;
  /** Which pane collapse hides: the second (to its natural size) or the first (entirely). */
  private collapsing: "first" | "second" = "second";

  constructor(
    readonly first: HTMLElement,
    readonly second: HTMLElement,
    private readonly opts: SplitOptions,
  ) {
    this.chosen = load(opts.key);
    const horizontal = opts.direction === "row";
    this.gutter = h("div", {
      class: `gutter gutter-${opts.direction}`,
      role: "separator",
      tabindex: "0",
      "aria-orientation": horizontal ? "vertical" : "horizontal",
      "aria-label": `resize (${opts.key})`,
      "data-split": opts.key,
      title: "drag to resize (double click: default size)",
      onpointerdown: (e: PointerEvent) => this.drag(e),
      ondblclick: () => this.set(null),
      onkeydown: (e: KeyboardEvent) => this.key(e),
    });
    first.classList.add("pane");
    second.classList.add("pane");
    this.el = h("div", { class: `split split-${opts.direction}`, "data-split": opts.key }, first, this.gutter, second);
    new ResizeObserver(() => this.apply()).observe(this.el);
  }

  private get total(): number {
    const r = this.el.getBoundingClientRect();
    return this.opts.direction === "row" ? r.width : r.height;
  }

  /** Gives the first pane a size (px, a function of the split's) while a view needs it, over
   * the user's and the default (null: back to them); a drag of the gutter ends it. */
  setTransient(size: ((totalPx: number) => number) | null): void {
    this.transient = size;
    this.apply();
  }

  /** The first pane's share now (a transient size, the user's or the default), clamped to the
   * current size. */
  get fraction(): number {
    const total = this.total;
    const initial = this.opts.initial;
    const px = (f: (t: number) => number) => f(total) / Math.max(1, total - GUTTER_PX);
    const base = this.transient ? px(this.transient) : (this.chosen ?? (typeof initial === "number" ? initial : px(initial)));
    return clampFraction(base, total, this.opts.minFirst, this.opts.minSecond);
  }

  /** Sets (and remembers) the first pane's share; null restores the default. */
  set(fraction: number | null): void {
    this.transient = null;
    this.chosen = fraction === null ? null : clampFraction(fraction, this.total, this.opts.minFirst, this.opts.minSecond);
    save(this.opts.key, this.chosen);
    this.apply();
  }

  /** Collapses the second pane to its own natural size (a panel with nothing to show keeps
   * only its header), or hides the first pane (`which`: "first", a pane shown on demand); the
   * other pane takes the rest and the gutter hides. */
  setCollapsed(collapsed: boolean, which: "first" | "second" = "second"): void {
    if (collapsed === this.collapsed && which === this.collapsing) return;
    this.collapsed = collapsed;
    this.collapsing = which;
    this.apply();
  }

  private apply(): void {
    this.el.classList.toggle("collapsed", this.collapsed);
    this.gutter.hidden = this.collapsed;
    this.first.hidden = this.collapsed && this.collapsing === "first";
    if (this.collapsed && this.collapsing === "first") {
      this.second.style.flex = "1 1 0";
      return;
    }
    if (this.collapsed) {
      this.first.style.flex = "1 1 0";
      this.second.style.flex = "0 0 auto";
      return;
    }
    const f = this.fraction;
    this.gutter.setAttribute("aria-valuenow", String(Math.round(f * 100)));
    this.first.style.flex = `0 0 calc((100% - ${GUTTER_PX}px) * ${f.toFixed(4)})`;
    this.second.style.flex = "1 1 0";
  }

  private drag(e: PointerEvent): void {
    if (e.button !== 0) return;
    e.preventDefault();
    const rect = this.el.getBoundingClientRect();
    const row = this.opts.direction === "row";
    const start = row ? rect.left : rect.top;
    const space = (row ? rect.width : rect.height) - GUTTER_PX;
    this.gutter.setPointerCapture(e.pointerId);
    this.el.classList.add("dragging");
    this.transient = null;
    const move = (ev: PointerEvent) => {
      const at = (row ? ev.clientX : ev.clientY) - start - GUTTER_PX / 2;
      this.chosen = clampFraction(at / space, rect[row ? "width" : "height"], this.opts.minFirst, this.opts.minSecond);
      this.apply();
    };
    const up = () => {
      this.gutter.removeEventListener("pointermove", move);
      this.gutter.removeEventListener("pointerup", up);
      this.gutter.removeEventListener("pointercancel", up);
      this.el.classList.remove("dragging");
      save(this.opts.key, this.chosen);
    };
    this.gutter.addEventListener("pointermove", move);
    this.gutter.addEventListener("pointerup", up);
    this.gutter.addEventListener("pointercancel", up);
  }

  private key(e: KeyboardEvent): void {
    const row = this.opts.direction === "row";
    const less = row ? "ArrowLeft" : "ArrowUp";
    const more = row ? "ArrowRight" : "ArrowDown";
    if (e.key !== less && e.key !== more && e.key !== "Home" && e.key !== "End") return;
    e.preventDefault();
    const step = e.shiftKey ? 0.1 : 0.02;
    const f = this.fraction;
    if (e.key === "Home") this.set(0);
    else if (e.key === "End") this.set(1);
    else this.set(f + (e.key === more ? step : -step));
  }
}
