// memoryui: the top bar's scope picker (templates/base.html). Without JavaScript its menu is a page
// of its own (/scopes/); with it, the menu opens in place, closes on Escape, on a click outside it
// and on a second click on its summary, and a box filters a long list of scopes as you type.
(function () {
  "use strict";

  function picker() {
    return document.querySelector("[data-scope-picker]");
  }

  function close(details, refocus) {
    if (!details || !details.open) return;
    details.open = false;
    if (refocus) details.querySelector("summary").focus();
  }

  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "Escape") return;
    var details = picker();
    if (details && details.open) {
      close(details, true);
      evt.stopPropagation();
    }
  });

  document.addEventListener("click", function (evt) {
    var details = picker();
    if (details && details.open && !details.contains(evt.target)) close(details, false);
  });

  // The menu arrives by htmx when the picker is first opened: focus its filter (or first scope).
  document.addEventListener("htmx:afterSwap", function (evt) {
    var menu = evt.target.querySelector && evt.target.querySelector("[data-scope-menu]");
    if (!menu || !picker() || !picker().open) return;
    var first = menu.querySelector("[data-scope-filter]") || menu.querySelector("[aria-current]") || menu.querySelector("a");
    if (first) first.focus();
  });

  document.addEventListener("input", function (evt) {
    var box = evt.target;
    if (!box.matches || !box.matches("[data-scope-filter]")) return;
    var words = box.value.trim().toLowerCase();
    var menu = box.closest("[data-scope-menu]");
    menu.querySelectorAll("[data-scope-option]").forEach(function (link) {
      var name = link.getAttribute("data-scope-option");
      link.parentElement.hidden = Boolean(words) && Boolean(name) && name.toLowerCase().indexOf(words) === -1;
    });
  });

  // Enter in the filter takes the first scope still shown.
  document.addEventListener("keydown", function (evt) {
    var box = evt.target;
    if (evt.key !== "Enter" || !box.matches || !box.matches("[data-scope-filter]")) return;
    evt.preventDefault();
    var menu = box.closest("[data-scope-menu]");
    var shown = Array.prototype.filter.call(menu.querySelectorAll("[data-scope-option]"), function (link) {
      return !link.parentElement.hidden && link.getAttribute("data-scope-option");
    });
    if (shown.length) shown[0].click();
  });
})();
