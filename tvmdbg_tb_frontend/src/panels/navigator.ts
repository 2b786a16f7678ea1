/** The side column's tabbed panel: the lists that lead to an op (alerts, a comparison's ops).
 * One shows at a time, in the same pane, so opening Compare never moves the rest of the page. */
import { h, setChildren } from "../dom";
import { keepFocus, roving } from "../roving";

export interface NavigatorTab {
  /** Short id, the tab's data-tab. */
  readonly tabId: string;
  readonly tabLabel: string;
  readonly el: HTMLElement;
  /** Called when the tab is shown. */
  activate?(): void;
}

export class Navigator {
  readonly el: HTMLElement;
  private readonly bar: HTMLElement;
  private readonly body: HTMLElement;
  private active: NavigatorTab;

  constructor(private readonly tabs: NavigatorTab[]) {
    this.bar = h("nav", { class: "tabs navigator-tabs", role: "tablist", "aria-label": "side panels (arrow keys switch)" });
    roving(this.bar, ".tab", "horizontal", (tab) => this.show(tab.dataset.tab ?? ""));
    this.body = h("div", { class: "navigator-body" });
    this.el = h("section", { class: "panel navigator", "data-panel": "navigator" }, this.bar, this.body);
    this.active = tabs[0];
    for (const tab of tabs) {
      tab.el.setAttribute("role", "tabpanel");
      this.body.appendChild(tab.el);
    }
    this.show(tabs[0]);
  }

  show(tab: NavigatorTab | string): void {
    const next = typeof tab === "string" ? this.tabs.find((t) => t.tabId === tab) : tab;
    if (!next) return;
    this.active = next;
    this.el.dataset.tab = next.tabId;
    for (const t of this.tabs) t.el.hidden = t !== next;
    keepFocus(this.bar, () =>
      setChildren(
        this.bar,
        this.tabs.map((t) =>
          h(
            "button",
            {
              role: "tab",
              class: `tab${t === next ? " active" : ""}`,
              "aria-selected": String(t === next),
              "data-tab": t.tabId,
              "data-key": t.tabId,
              tabindex: t === next ? "0" : "-1",
              onclick: () => this.show(t),
            },
            t.tabLabel,
          ),
        ),
      ),
    );
    next.activate?.();
  }

  get current(): string {
    return this.active.tabId;
  }
}
