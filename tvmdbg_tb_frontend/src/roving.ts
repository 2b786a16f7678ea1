/**
 * Keyboard focus in lists: one Tab stop per list (roving tabindex: the current item is
 * tabindex 0, the others -1) and the arrow keys move through it, as in a native list box; and
 * focus that survives a re-render (a panel that rebuilds its items after a click keeps the
 * focus on the same item, never dropping it to the page's body).
 */

export type Orientation = "vertical" | "horizontal" | "both";

/** The item an arrow key (or Home/End) moves to from `at` (-1: none focused), or null when the
 * key is not one of the list's. */
export function nextIndex(key: string, at: number, count: number, orientation: Orientation): number | null {
  if (count === 0) return null;
  const back = (orientation !== "horizontal" && key === "ArrowUp") || (orientation !== "vertical" && key === "ArrowLeft");
  const forward = (orientation !== "horizontal" && key === "ArrowDown") || (orientation !== "vertical" && key === "ArrowRight");
  if (key === "Home") return 0;
  if (key === "End") return count - 1;
  if (back) return Math.max(0, at - 1);
  if (forward) return Math.min(count - 1, at + 1);
  return null;
}

/** Makes `current` (else the first item) the list's only Tab stop. */
export function setTabStop(items: HTMLElement[], current: HTMLElement | null): void {
  const stop = current && items.includes(current) ? current : items[0];
  for (const item of items) item.tabIndex = item === stop ? 0 : -1;
}

/**
 * Arrow keys in `container` move the focus among its items (those matching `selector`, in
 * document order); `onMove` runs for the item moved to (e.g. select it). Installed once per
 * container: items may be rebuilt at will, call setTabStop after each render.
 */
export function roving(container: HTMLElement, selector: string, orientation: Orientation, onMove?: (item: HTMLElement) => void): void {
  container.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    const items = [...container.querySelectorAll<HTMLElement>(selector)];
    const at = items.indexOf(document.activeElement as HTMLElement);
    if (at < 0) return;
    const next = nextIndex(e.key, at, items.length, orientation);
    if (next === null) return;
    e.preventDefault();
    setTabStop(items, items[next]);
    items[next].focus();
    items[next].scrollIntoView({ block: "nearest", inline: "nearest" });
    onMove?.(items[next]);
  });
}

/**
 * Runs `render` (which rebuilds the container's items) and, when the focus was inside the
 * container, puts it back on the item with the same `data-key` (its new element), else on the
 * item keyed `fallback` (a panel that now shows something else: its heading).
 */
export function keepFocus(container: HTMLElement, render: () => void, fallback?: string): void {
  const active = document.activeElement as HTMLElement | null;
  const inside = !!active && active !== container && container.contains(active);
  const key = inside ? active!.dataset.key : undefined;
  render();
  if (!inside) return;
  const keyed = [...container.querySelectorAll<HTMLElement>("[data-key]")];
  const again = keyed.find((el) => el.dataset.key === key) ?? keyed.find((el) => el.dataset.key === fallback);
  if (again && again !== document.activeElement) again.focus({ preventScroll: true });
}
