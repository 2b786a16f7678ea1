import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { typing } from "../src/keys";
import { nextIndex } from "../src/roving";

describe("nextIndex", () => {
  it("moves one item along the list's own direction and stops at its ends", () => {
    assert.equal(nextIndex("ArrowDown", 0, 3, "vertical"), 1);
    assert.equal(nextIndex("ArrowDown", 2, 3, "vertical"), 2);
    assert.equal(nextIndex("ArrowUp", 0, 3, "vertical"), 0);
    assert.equal(nextIndex("ArrowRight", 0, 3, "vertical"), null);
    assert.equal(nextIndex("ArrowRight", 1, 3, "horizontal"), 2);
    assert.equal(nextIndex("ArrowDown", 1, 3, "horizontal"), null);
    assert.equal(nextIndex("ArrowLeft", 1, 3, "both"), 0);
  });

  it("goes to the ends with Home and End, and starts from nothing focused", () => {
    assert.equal(nextIndex("Home", 2, 5, "vertical"), 0);
    assert.equal(nextIndex("End", 0, 5, "vertical"), 4);
    assert.equal(nextIndex("ArrowDown", -1, 5, "vertical"), 0);
    assert.equal(nextIndex("ArrowDown", 0, 0, "vertical"), null);
    assert.equal(nextIndex("Enter", 0, 5, "vertical"), null);
  });
});

describe("typing", () => {
  const el = (tagName: string, type = "", isContentEditable = false) => ({ tagName, type, isContentEditable }) as unknown as HTMLElement;
  it("takes no shortcut in fields one types in, and does on buttons and checkboxes", () => {
    assert.equal(typing(el("INPUT", "search")), true);
    assert.equal(typing(el("INPUT", "text")), true);
    assert.equal(typing(el("TEXTAREA")), true);
    assert.equal(typing(el("SELECT")), true);
    assert.equal(typing(el("DIV", "", true)), true);
    assert.equal(typing(el("INPUT", "checkbox")), false);
    assert.equal(typing(el("BUTTON")), false);
    assert.equal(typing(null), false);
  });
});
