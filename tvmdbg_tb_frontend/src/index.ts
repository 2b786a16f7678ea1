/** The "TVM Debugger" dashboard. TensorBoard's plugin_entry.html imports this module and calls
 * render(); the page's base is /data/plugin/tvmdbg/, so every data URL here is relative. */
import styles from "./styles.css";
import { Api } from "./api";
import { h, setChildren } from "./dom";
import { AlertsPanel } from "./panels/alerts";
import { ComparePanel } from "./panels/compare";
import { DetailsPanel } from "./panels/details";
import { ExecutionsPanel } from "./panels/executions";
import { GraphPanel } from "./panels/graph";
import { HeaderBar } from "./panels/header";
import { LivePanel } from "./panels/live";
import { Navigator } from "./panels/navigator";
import { RanksBar } from "./panels/ranks";
import { SourcePanel } from "./panels/source";
import { StackPanel } from "./panels/stack";
import { TimelinePanel } from "./panels/timeline";
import { Split } from "./split";
import { installShortcuts } from "./keys";
import { Store } from "./store";
import { followDarkMode } from "./theme";

/** How often the runs list (and so the live state and growing counts) is refreshed. */
export const POLL_INTERVAL_MS = 3000;

export function render(root: HTMLElement = document.body): Store {
  const style = document.createElement("style");
  style.textContent = styles;
  document.head.appendChild(style);
  followDarkMode(document.body);

  const store = new Store(new Api());
  const header = new HeaderBar(store);
  const ranks = new RanksBar(store);
  const empty = h("div", { class: "empty-logdir", hidden: true });
  const alerts = new AlertsPanel(store);
  const live = new LivePanel(store);
  const timeline = new TimelinePanel(store);
  const executions = new ExecutionsPanel(store);
  const graph = new GraphPanel(store);
  const details = new DetailsPanel(store);
  const stack = new StackPanel(store);
  const source = new SourcePanel(store);
  const compare = new ComparePanel(store, graph);
  const navigator = new Navigator([alerts, compare]);

  // Every pane can be resized (the sizes are remembered); each panel scrolls inside itself.
  // The source and the stack share the strip under the work area (as in Debugger V2): at
  // 1440x900 the source shows 12+ lines and the stack 5+ frames after an alert click.
  const side = new Split(navigator.el, live.el, { key: "side", direction: "column", initial: 0.6, minFirst: 140, minSecond: 90 });
  live.onShape = (open) => side.setCollapsed(!open);
  const code = new Split(source.el, stack.el, {
    key: "code",
    direction: "row",
    initial: (total) => total - Math.min(440, Math.max(250, total * 0.32)),
    minFirst: 300,
    minSecond: 200,
  });
  // The op's details first: its title, health and inputs' table (~170 px), the list the rest.
  const center = new Split(executions.el, details.el, {
    key: "center",
    direction: "column",
    initial: (total) => total - Math.max(150, total * 0.52),
    minFirst: 80,
    minSecond: 150,
  });
  const columns = new Split(center.el, graph.el, { key: "columns", direction: "row", initial: 0.52, minFirst: 330, minSecond: 260 });
  // A comparison's results take the timeline's place, as wide, and more of its height, while
  // they are open (✕ closes them: the timeline is back).
  const top = h("div", { class: "top-slot" }, compare.results, timeline.el);
  compare.results.hidden = true;
  const upper = new Split(top, columns.el, {
    key: "timeline",
    direction: "column",
    initial: () => 150, // its head, the calls and the selected call's three lines
    minFirst: 96,
    minSecond: 250,
  });
  compare.onShape = (open) => {
    compare.results.hidden = !open;
    timeline.el.hidden = open;
    upper.setTransient(open ? (total) => Math.max(200, total * 0.42) : null);
  };
  const work = new Split(upper.el, code.el, {
    key: "strip",
    direction: "column",
    initial: (total) => total - Math.min(300, Math.max(170, total * 0.62 - 212)),
    minFirst: 340,
    minSecond: 130,
  });
  const main = new Split(side.el, work.el, {
    key: "main",
    direction: "row",
    initial: (total) => Math.min(340, Math.max(230, total * 0.2)),
    minFirst: 200,
    minSecond: 600,
  });
  main.el.classList.add("layout");
  const help = installShortcuts({
    next: () => (navigator.show("alerts"), void alerts.step(1)),
    previous: () => (navigator.show("alerts"), void alerts.step(-1)),
    jumps: [
      { key: "1", label: "alerts", target: () => alerts.focusTarget(), reveal: () => navigator.show("alerts") },
      { key: "2", label: "execution timeline", target: () => timeline.focusTarget() },
      { key: "3", label: "graph executions (kernels)", target: () => executions.focusTarget() },
      { key: "4", label: "op details", target: () => details.focusTarget() },
      { key: "5", label: "graph (its selected node)", target: () => graph.focusTarget() },
      { key: "6", label: "source code", target: () => source.focusTarget() },
      { key: "7", label: "stack trace", target: () => stack.focusTarget() },
      { key: "8", label: "compare", target: () => compare.focusTarget(), reveal: () => navigator.show("compare") },
      { key: "9", label: "live", target: () => live.focusTarget() },
    ],
  });
  header.onHelp = () => (help.hidden = !help.hidden);
  setChildren(root, h("div", { class: "app" }, header.el, ranks.el, empty, main.el, help));

  let polling = false;
  const poll = async () => {
    if (polling) return;
    polling = true;
    try {
      const [runs, status] = await Promise.all([store.api.runs(), store.api.status().catch(() => null)]);
      header.status = status;
      header.lastPoll = Date.now();
      const none = runs.runs.length === 0;
      empty.hidden = !none;
      main.el.hidden = none;
      if (none) showInstructions(empty, status?.logdir ?? "", status?.problems ?? []);
      store.setRuns(runs.runs, runs.default_run ?? null, runs.default_run_reason ?? "");
      header.render();
      document.body.dataset.ready = "true";
    } catch (err) {
      store.reportError(err);
    } finally {
      polling = false;
    }
  };
  store.refresh = () => void poll();
  void poll();
  setInterval(() => void poll(), POLL_INTERVAL_MS);
  return store;
}

function showInstructions(el: HTMLElement, logdir: string, problems: string[]): void {
  const dir = logdir || "/tmp/tvmdbg_logdir";
  setChildren(
    el,
    h("h2", null, "No tvmdbg data in this logdir yet"),
    h("p", null, "Add one line near the top of your TVM script, run it, and this page fills in by itself (it checks every few seconds):"),
    h(
      "pre",
      { class: "snippet" },
      `import tvmdbg\ntvmdbg.enable_dump_debug_info("${dir}", tensor_debug_mode="FULL_HEALTH",\n                              circular_buffer_size=-1)`,
    ),
    h(
      "p",
      { class: "muted" },
      `This TensorBoard reads ${dir}; runs written there (one sub-directory per process) appear here while the program runs.`,
    ),
    problems.length
      ? h(
          "div",
          { class: "problems" },
          problems.map((p) => h("div", { class: "problem" }, "⚠ ", p)),
        )
      : null,
  );
}
