/** The health pill: NaN / -∞ / +∞ / - / 0 / + counts as coloured segments, alarming for non-finite,
 * with the numbers in view: every count ("full"), the counts that are not zero ("counts": the
 * inputs of an op, where "zero 1,703" is the diagnosis), or the non-finite ones ("compact":
 * rows of a list). The tooltip always says every count. */
import { h } from "../dom";
import { type Health, healthText, isNonFinite, pillSegments, formatCount } from "../format";

export type PillStyle = "full" | "counts" | "compact";

export function healthPill(health: Health, style: PillStyle | boolean = "full"): HTMLElement {
  const mode: PillStyle = style === true ? "compact" : style === false ? "full" : style;
  const segments = pillSegments(health);
  const known = segments.filter((s) => s.count > 0);
  const total = known.reduce((a, s) => a + s.count, 0);
  const bad = isNonFinite(health);
  const bar = h(
    "span",
    { class: "pill-bar" },
    known.map((s) => h("span", { class: `seg seg-${s.kind}`, style: { flexGrow: String(total ? s.count / total : 0) } })),
  );
  const shown = mode === "full" ? segments : mode === "counts" ? known : [];
  return h(
    "span",
    {
      class: `health-pill${bad ? " bad" : ""}${mode !== "full" ? " compact" : ""}`,
      title: healthText(health),
      "data-health": healthText(health),
    },
    bar,
    mode === "compact"
      ? bad
        ? h("span", { class: "pill-label" }, nonFiniteLabel(health))
        : null
      : h(
          "span",
          { class: "pill-counts" },
          shown.map((s) => h("span", { class: `cnt cnt-${s.kind}${s.count ? "" : " zero-count"}` }, `${s.label} ${formatCount(s.count)}`)),
        ),
  );
}

/** "NaN 3" or "NaN 3, +∞ 1": the non-finite part only. */
export function nonFiniteLabel(health: Health): string {
  const parts: string[] = [];
  if (health.nan) parts.push(`NaN ${formatCount(health.nan)}`);
  if (health.negInf) parts.push(`-∞ ${formatCount(health.negInf)}`);
  if (health.posInf) parts.push(`+∞ ${formatCount(health.posInf)}`);
  return parts.join(", ");
}
