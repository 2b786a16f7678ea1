/**
 * Maps a scroll position to rows of a virtual list whose full height may exceed what a browser
 * can lay out (Chrome caps an element near 33.5M px, Firefox near 17.9M px; Debugger V2's list
 * breaks at ~883k rows). The spacer never grows past `maxSpacerPx`: past that, scrolling is
 * scaled so that the top of the scroll range shows row 0 and the bottom shows the last rows.
 */
export interface VisibleWindow {
  /** First row (partially) visible. */
  first: number;
  /** One past the last row to render. */
  end: number;
  /** Pixel offset of row `first`'s top relative to the viewport's top (<= 0). */
  offsetPx: number;
}

export const DEFAULT_MAX_SPACER_PX = 4_000_000;

export class ScrollMap {
  readonly rowCount: number;
  readonly rowHeight: number;
  readonly viewportHeight: number;
  readonly maxSpacerPx: number;

  constructor(rowCount: number, rowHeight: number, viewportHeight: number, maxSpacerPx = DEFAULT_MAX_SPACER_PX) {
    if (!(rowHeight > 0)) throw new Error(`rowHeight must be positive, got ${rowHeight}`);
    this.rowCount = Math.max(0, Math.floor(rowCount));
    this.rowHeight = rowHeight;
    this.viewportHeight = Math.max(0, viewportHeight);
    this.maxSpacerPx = Math.max(maxSpacerPx, this.viewportHeight + rowHeight);
  }

  /** Height the list would have with one pixel per pixel. */
  get contentHeight(): number {
    return this.rowCount * this.rowHeight;
  }

  /** True when scrolling is scaled (the content is taller than the spacer may be). */
  get scaled(): boolean {
    return this.contentHeight > this.maxSpacerPx;
  }

  /** Height of the element that gives the scroll container its scroll range. */
  get spacerHeight(): number {
    return Math.min(this.contentHeight, this.maxSpacerPx);
  }

  private get maxScrollTop(): number {
    return Math.max(0, this.spacerHeight - this.viewportHeight);
  }

  private get maxContentTop(): number {
    return Math.max(0, this.contentHeight - this.viewportHeight);
  }

  /** Content pixel (distance from row 0's top) shown at the viewport's top for a scrollTop. */
  contentTopFor(scrollTop: number): number {
    const s = Math.min(Math.max(0, scrollTop), this.maxScrollTop);
    if (!this.scaled || this.maxScrollTop === 0) return s;
    return (s / this.maxScrollTop) * this.maxContentTop;
  }

  /** The rows to render for a scrollTop, and where the first one sits. */
  window(scrollTop: number, overscan = 2): VisibleWindow {
    if (this.rowCount === 0) return { first: 0, end: 0, offsetPx: 0 };
    const top = this.contentTopFor(scrollTop);
    const first = Math.min(this.rowCount - 1, Math.floor(top / this.rowHeight));
    const offsetPx = first * this.rowHeight - top;
    const visible = Math.ceil((this.viewportHeight - offsetPx) / this.rowHeight);
    const end = Math.min(this.rowCount, first + visible + overscan);
    return { first, end, offsetPx };
  }

  /** scrollTop that puts `row` at the viewport's top ("align: start") or centre. */
  scrollTopFor(row: number, align: "start" | "center" = "start"): number {
    const r = Math.min(Math.max(0, Math.floor(row)), Math.max(0, this.rowCount - 1));
    let top = r * this.rowHeight;
    if (align === "center") top -= (this.viewportHeight - this.rowHeight) / 2;
    return this.scrollTopForContent(top);
  }

  /** scrollTop that shows content pixel `top` at the viewport's top (the inverse of
   * contentTopFor): keeps the same rows in view when the viewport or row count changes. */
  scrollTopForContent(top: number): number {
    const t = Math.min(Math.max(0, top), this.maxContentTop);
    if (!this.scaled || this.maxContentTop === 0) return t;
    return (t / this.maxContentTop) * this.maxScrollTop;
  }

  /** True when `row` is entirely inside the viewport at this scrollTop. */
  isFullyVisible(row: number, scrollTop: number): boolean {
    const top = row * this.rowHeight - this.contentTopFor(scrollTop);
    return top >= 0 && top + this.rowHeight <= this.viewportHeight;
  }
}
