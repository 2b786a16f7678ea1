/** What the graph's drawings share: a laid-out node's box, a drawing with its framing, the
 * arrow head, and names cut to a width. */
import { svg } from "../dom";

export interface NodeBox {
  id: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

/** What a drawing gives the panel: the SVG, the box of everything drawn and the box to frame. */
export interface Drawn {
  root: SVGSVGElement;
  extent: { x: number; y: number; w: number; h: number };
  home: { cx: number; cy: number; scale: number };
}

export function arrowDefs(): SVGElement {
  return svg(
    "defs",
    {},
    svg(
      "marker",
      { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow-head" }),
    ),
  );
}

export function truncate(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n - 1)}…` : s;
}
