"""What every browser test of a page checks about how it looks: at the two widths people use
(1400 px, a laptop; 1024 px, a small window or a tablet) nothing scrolls sideways, and a screenshot
is saved for a human to look at."""

from __future__ import annotations

from .conftest import SCREENSHOTS

WIDTHS = (1400, 1024)


def sideways(page) -> list[str]:
    """What sticks out past the window's right edge, or out of its panel or card, outside the boxes
    that scroll on their own (overflow-x auto or scroll: a long table, a code block)."""
    return page.evaluate(
        """() => {
          const width = document.documentElement.clientWidth;
          const out = [];
          const name = (node) => `${node.tagName.toLowerCase()}${node.id ? "#" + node.id : ""}.${node.className}`;
          const scrollsOnItsOwn = (node) => {
            for (let up = node.parentElement; up && up !== document.body; up = up.parentElement) {
              if (["auto", "scroll"].includes(getComputedStyle(up).overflowX)) return true;
            }
            return false;
          };
          for (const node of document.body.querySelectorAll("*")) {
            if (scrollsOnItsOwn(node)) continue;
            const box = node.getBoundingClientRect();
            if (!box.width) continue;
            const card = node.parentElement && node.parentElement.closest(".panel, .card, .cluster, dialog");
            const edge = card ? card.getBoundingClientRect().right : width;
            if (box.right > edge + 1) {
              const past = card ? name(card) : "the window";
              out.push(`${name(node)} right=${Math.round(box.right)} past ${past}=${Math.round(edge)}`);
            }
          }
          const scrolled = document.documentElement.scrollWidth;
          if (scrolled > width) out.unshift(`page scrollWidth=${scrolled} > ${width}`);
          return out.slice(0, 8);
        }"""
    )


def at_both_widths(page, label: str) -> None:
    """Save the page as it is now at 1400 and 1024 px as `<label>-<width>.png`, and fail if anything
    on it scrolls sideways at either width. The viewport is left at 1400 px."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    overflowing = {}
    for width in (*WIDTHS[1:], WIDTHS[0]):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(SCREENSHOTS / f"{label}-{width}.png"), full_page=True)
        if sticking_out := sideways(page):
            overflowing[width] = sticking_out
    assert overflowing == {}, f"{label} scrolls sideways: {overflowing}"
