/**
 * The dashboard's keyboard shortcuts (none while typing in a field): n / p select the next /
 * previous alert, the digits jump to a panel (its current item: the alert, the call, the
 * kernel row, the op, the graph's selected node, the source, the stack frame), ? lists them.
 */
import { h, setChildren } from "./dom";

/** Something the keyboard can land on (an HTML element or an SVG node). */
export type Focusable = HTMLElement | SVGElement;

export interface Jump {
  key: string;
  label: string;
  /** The element to focus (null: the panel has nothing yet). */
  target: () => Focusable | null;
  /** Shown before focusing (e.g. the navigator's tab holding the panel). */
  reveal?: () => void;
}

export interface Shortcuts {
  jumps: Jump[];
  next: () => void;
  previous: () => void;
}

/** Whether a key event belongs to a field the user types in (never a shortcut there). */
export function typing(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  if (!el || !el.tagName) return false;
  const tag = el.tagName.toLowerCase();
  if (tag === "textarea" || tag === "select" || el.isContentEditable) return true;
  if (tag !== "input") return false;
  const type = (el as HTMLInputElement).type;
  return !["checkbox", "radio", "button", "submit", "range"].includes(type);
}

/** Installs the shortcuts on the document; returns the help box (hidden until ?). */
export function installShortcuts(shortcuts: Shortcuts): HTMLElement {
  const help = h("div", { class: "shortcuts-help", role: "dialog", "aria-label": "keyboard shortcuts", hidden: true });
  const rows: [string, string][] = [
    ["n / p", "next / previous alert"],
    ...shortcuts.jumps.map((j): [string, string] => [j.key, j.label]),
    ["Tab", "the next panel's list (one stop each); arrow keys move in it, Enter selects"],
    ["?", "this list (Esc closes)"],
  ];
  setChildren(
    help,
    h("div", { class: "shortcuts-title" }, "Keyboard"),
    h(
      "table",
      null,
      h(
        "tbody",
        null,
        rows.map(([k, what]) => h("tr", null, h("td", null, h("kbd", null, k)), h("td", null, what))),
      ),
    ),
  );
  document.addEventListener("keydown", (e) => {
    if (e.altKey || e.ctrlKey || e.metaKey || typing(e.target)) return;
    if (e.key === "Escape" && !help.hidden) {
      help.hidden = true;
      return;
    }
    if (e.key === "?") help.hidden = !help.hidden;
    else if (e.key === "n") shortcuts.next();
    else if (e.key === "p") shortcuts.previous();
    else {
      const jump = shortcuts.jumps.find((j) => j.key === e.key);
      if (!jump) return;
      jump.reveal?.();
      const target = jump.target();
      if (!target) return;
      target.focus({ preventScroll: true });
      // Into view inside its own list (never a drawing's box, which the graph frames itself).
      if (target instanceof HTMLElement && !target.closest(".graph-canvas")) target.scrollIntoView({ block: "nearest", inline: "nearest" });
    }
    e.preventDefault();
  });
  return help;
}
