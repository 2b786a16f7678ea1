/** The ranks of the disco job the shown run belongs to (tvmdbg.disco: one run per rank, one job
 * id): a button per rank that shows its run, the rank whose first NaN/Inf came first marked
 * (the backend's default run, the CLI's choice). Hidden for a run of a lone process. */
import type { RunInfo } from "../api";
import { h, setChildren } from "../dom";
import type { Store } from "../store";

export class RanksBar {
  readonly el: HTMLElement = h("div", { class: "ranks-bar small", "data-testid": "ranks", hidden: true });

  constructor(private readonly store: Store) {
    store.on("runs", () => this.render());
    store.on("run", () => this.render());
  }

  render(): void {
    const job = this.store.runInfo?.disco;
    if (!job) {
      this.el.hidden = true;
      setChildren(this.el);
      return;
    }
    const ranks = this.store.runs
      .filter((r): r is RunInfo & { disco: NonNullable<RunInfo["disco"]> } => r.disco?.job_id === job.job_id)
      .sort((a, b) => a.disco.rank - b.disco.rank);
    this.el.hidden = false;
    setChildren(
      this.el,
      h("span", { class: "muted" }, `disco job ${job.job_id}: ${ranks.length} of ${job.world_size} ranks`),
      ranks.map((r) => {
        const first = r.run === this.store.defaultRun && r.num_alerts > 0;
        const label = `rank ${r.disco.rank}${r.num_alerts ? ` · ${r.num_alerts} alerts` : ""}${first ? " · first NaN/Inf" : ""}`;
        return h(
          "button",
          {
            class: `rank${r.run === this.store.run ? " current" : ""}${first ? " first" : ""}`,
            "data-rank": String(r.disco.rank),
            title: r.run,
            onclick: () => this.store.pickRun(r.run),
          },
          label,
        );
      }),
    );
  }
}
