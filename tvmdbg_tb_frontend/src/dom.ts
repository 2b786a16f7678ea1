/** A small element builder: h("div", {class: "x", onclick: f}, child, "text"). */
export type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, unknown>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs | null = null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v as EventListener);
      else if (k === "style" && typeof v === "object") Object.assign(el.style, v);
      else if (k === "dataset" && typeof v === "object") Object.assign(el.dataset, v);
      else el.setAttribute(k === "className" ? "class" : k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

export function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
}

/** Replaces an element's children. */
export function setChildren(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (SVGElement | null)[]
): SVGElementTagNameMap[K] {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v as EventListener);
    else el.setAttribute(k, String(v));
  }
  for (const c of children) if (c) el.appendChild(c);
  return el;
}

/**
 * Scrolls `container` alone so that `target` (a descendant) is in view: centred vertically when
 * `centre`, else only as far as needed. Unlike scrollIntoView it never scrolls the page or an
 * outer panel, so a selection cannot move the part of the page the user is looking at.
 */
export function scrollWithin(container: HTMLElement, target: HTMLElement, centre = false): void {
  const c = container.getBoundingClientRect();
  const t = target.getBoundingClientRect();
  const top = t.top - c.top + container.scrollTop;
  const left = t.left - c.left + container.scrollLeft;
  if (centre) container.scrollTop = Math.max(0, top - (container.clientHeight - t.height) / 2);
  else if (top < container.scrollTop) container.scrollTop = top;
  else if (top + t.height > container.scrollTop + container.clientHeight) container.scrollTop = top + t.height - container.clientHeight;
  // Sideways only for a target narrower than the box (a timeline item, not a source line).
  if (t.width > container.clientWidth) return;
  if (left < container.scrollLeft) container.scrollLeft = left;
  else if (left + t.width > container.scrollLeft + container.clientWidth) container.scrollLeft = left + t.width - container.clientWidth;
}
