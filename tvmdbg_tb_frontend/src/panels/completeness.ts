/** A banner on the run when its dump is incomplete (docs/routes.md#runs, "Completeness"): what
 * is missing, where and why, so that "no NaN" is never read as "all finite" on a cut dump. */
import type { Completeness } from "../api";
import { h, setChildren } from "../dom";

export class CompletenessBanner {
  readonly el: HTMLElement = h("div", { class: "completeness-banner", "data-testid": "completeness-banner", role: "status", hidden: true });

  update(state: Completeness | null | undefined): void {
    const problems = state?.problems ?? [];
    this.el.hidden = !state || state.complete || problems.length === 0;
    this.el.dataset.state = state?.state ?? "";
    if (this.el.hidden) {
      setChildren(this.el);
      return;
    }
    const shown = problems.slice(0, 5);
    setChildren(
      this.el,
      h("strong", null, `⚠ This dump is ${state!.state}: data may be missing, so a missing NaN proves nothing.`),
      h(
        "ul",
        null,
        shown.map((p) => h("li", { "data-kind": p.kind }, p.message)),
      ),
      problems.length > shown.length ? h("div", { class: "muted small" }, `… and ${problems.length - shown.length} more`) : null,
    );
  }
}
