// memoryui: the little JavaScript there is. Pages work without it; this makes the htmx
// error states visible (htmx 2.x does not swap 4xx/5xx responses by default).
(function () {
  "use strict";

  var STATE_HEADER = "X-Memoryui-State";

  // The server's state partials (unauthorized / unavailable / invalid) carry the state header:
  // swap them in like a success, into wherever the server said (HX-Retarget for actions).
  document.addEventListener("htmx:beforeSwap", function (evt) {
    var xhr = evt.detail.xhr;
    if (xhr.status >= 400 && xhr.getResponseHeader(STATE_HEADER)) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text) node.textContent = text;
    return node;
  }

  // An error the server did not describe (a proxy's 502 page, a dropped connection): build the
  // unavailable state here, from text only; the response body is never put into the page.
  function showUnavailable(detail, title, what) {
    var verb = (detail.requestConfig && detail.requestConfig.verb) || "get";
    var isAction = verb.toLowerCase() !== "get";
    var alerts = document.getElementById("alerts");
    var target = isAction || !detail.target ? alerts : detail.target;
    if (!target) return;

    var box = el("div", "state state-unavailable");
    box.setAttribute("role", "alert");
    box.setAttribute("data-state", "unavailable");
    box.appendChild(el("div", "state-title", title));
    box.appendChild(el("p", null, what));
    box.appendChild(el("p", "muted", "Only this part of the page is affected."));
    var actions = el("div", "state-actions");
    var retry = el("button", "btn", "Retry");
    retry.type = "button";
    var path = detail.pathInfo && detail.pathInfo.requestPath;
    var source = detail.elt;
    var swapTarget = detail.target;
    retry.addEventListener("click", function () {
      if (isAction) box.remove();
      htmx.ajax(verb, path, { source: source, target: swapTarget });
    });
    actions.appendChild(retry);
    if (isAction) {
      var dismiss = el("button", "btn btn-quiet", "Dismiss");
      dismiss.type = "button";
      dismiss.setAttribute("data-dismiss", "");
      actions.appendChild(dismiss);
    }
    box.appendChild(actions);

    if (target === alerts) {
      alerts.appendChild(box);
    } else {
      target.replaceChildren(box);
    }
  }

  document.addEventListener("htmx:responseError", function (evt) {
    var xhr = evt.detail.xhr;
    if (xhr.getResponseHeader(STATE_HEADER)) return;
    var title = xhr.status >= 500 ? "Server unavailable" : "Request failed";
    showUnavailable(evt.detail, title, "The server answered status " + xhr.status + (xhr.statusText ? " " + xhr.statusText : "") + ".");
  });

  document.addEventListener("htmx:sendError", function (evt) {
    showUnavailable(evt.detail, "Server unreachable", "The server could not be reached (network error). Check that memoryui is running.");
  });

  // Messages are shown once: a request the user started (a click, a submit, typing; polls and
  // load triggers have no triggering event) asks the server to replace the page's messages.
  document.addEventListener("htmx:configRequest", function (evt) {
    if (evt.detail.triggeringEvent) evt.detail.headers["X-Memoryui-Replace-Alerts"] = "1";
  });

  // A destructive action asks first: the server swaps its question into the page's dialog.
  function confirmDialog() { return document.getElementById("confirm-dialog"); }
  document.addEventListener("htmx:afterSwap", function (evt) {
    var dialog = confirmDialog();
    if (dialog && evt.detail.target === dialog && dialog.children.length && !dialog.open) dialog.showModal();
  });
  // The confirmed request went out, or Cancel: the question is answered either way.
  document.addEventListener("htmx:beforeRequest", function (evt) {
    var dialog = confirmDialog();
    if (dialog && dialog.open && dialog.contains(evt.detail.elt)) {
      dialog.close();
    }
  });
  document.addEventListener("click", function (evt) {
    if (!evt.target.closest("[data-close-dialog]")) return;
    var dialog = evt.target.closest("dialog");
    if (dialog) dialog.close();
  });
  document.addEventListener("close", function (evt) {
    if (evt.target === confirmDialog()) evt.target.replaceChildren();
  }, true);

  // Filter forms: leave blank and default fields out of the URL (?kind=note, not
  // ?q=&scope=&kind=note&status=active…), so shared links and history stay readable.
  document.addEventListener("htmx:configRequest", function (evt) {
    var elt = evt.detail.elt;
    if (evt.detail.verb !== "get" || !elt.hasAttribute || !elt.hasAttribute("data-prune-empty")) return;
    var params = evt.detail.parameters;
    Object.keys(params).forEach(function (name) {
      var field = elt.elements[name];
      var fallback = field && field.getAttribute ? field.getAttribute("data-default") : null;
      if (params[name] === "" || params[name] === fallback) delete params[name];
    });
  });

  // After a sort header or pager link changes the URL, show the same choices in the filter form.
  // Not after the form's own requests: their URL is what the form held when it was sent, and the
  // user may have typed on since (a late answer must never overwrite what is in the search box).
  var historySource = null;
  document.addEventListener("htmx:beforeSwap", function (evt) {
    historySource = evt.detail.requestConfig ? evt.detail.requestConfig.elt : evt.detail.elt;
  });
  document.addEventListener("htmx:pushedIntoHistory", function () {
    var form = document.getElementById("filters");
    var source = historySource;
    historySource = null;
    if (!form || (source && form.contains(source))) return;
    var query = new URLSearchParams(window.location.search);
    Array.prototype.forEach.call(form.elements, function (field) {
      if (!field.name || field.type === "submit") return;
      field.value = query.get(field.name) || "";
      if (field.tagName === "SELECT" && field.selectedIndex < 0) field.selectedIndex = 0;
    });
  });

  // A successful retry from the alerts region clears that alert.
  document.addEventListener("htmx:afterRequest", function (evt) {
    var alerts = document.getElementById("alerts");
    if (evt.detail.successful && alerts && alerts.contains(evt.detail.elt)) {
      var state = evt.detail.elt.closest(".state");
      if (state) state.remove();
    }
  });

  document.addEventListener("click", function (evt) {
    var dismiss = evt.target.closest("[data-dismiss]");
    if (dismiss) {
      var box = dismiss.closest(".alert, .state");
      if (box) box.remove();
    }
  });

  // The Content-Security-Policy allows no inline handlers, style attributes or eval: what the
  // templates would have done inline is done here, from data attributes.

  // A filter form's search box asks as the user types (hx-trigger "keyup changed delay:…"). Enter
  // has already submitted the form: the request its keyup would send again is dropped.
  document.addEventListener("htmx:confirm", function (evt) {
    var trigger = evt.detail.triggeringEvent;
    if (trigger && trigger.type === "keyup" && trigger.key === "Enter" && evt.detail.elt.tagName === "FORM") {
      evt.preventDefault();
    }
  });

  // Bars and progress bars: data-width is a percentage, set through the style object (allowed by
  // the policy, unlike a style attribute), on the page and on every fragment htmx swaps in.
  function applyWidths(root) {
    if (!root || !root.querySelectorAll) return;
    var nodes = Array.prototype.slice.call(root.querySelectorAll("[data-width]"));
    if (root.hasAttribute && root.hasAttribute("data-width")) nodes.push(root);
    nodes.forEach(function (node) {
      var width = Number(node.getAttribute("data-width"));
      node.style.width = (isFinite(width) ? Math.min(Math.max(width, 0), 100) : 0) + "%";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { applyWidths(document); });
  document.addEventListener("htmx:load", function (evt) { applyWidths(evt.detail.elt); });

  // An input that shows its value in an <output> (data-output: its id; data-digits: decimals).
  document.addEventListener("input", function (evt) {
    var input = evt.target;
    if (!input.hasAttribute || !input.hasAttribute("data-output")) return;
    var output = document.getElementById(input.getAttribute("data-output"));
    if (output) output.value = Number(input.value).toFixed(Number(input.getAttribute("data-digits") || 0));
  });

  // "Select all" checkbox for the bulk actions.
  document.addEventListener("change", function (evt) {
    var all = evt.target.closest("[data-select-all]");
    if (!all) return;
    var name = all.getAttribute("data-select-all");
    var table = all.closest("table");
    table.querySelectorAll('input[type="checkbox"][name="' + name + '"]').forEach(function (box) {
      box.checked = all.checked;
    });
  });

  // --- store pages -------------------------------------------------------------------------

  // Copy buttons (data-copy: the id of the element whose text is copied), e.g. a new token's key,
  // which is shown once. The Clipboard API needs a secure context (https, or localhost); anywhere
  // else the text is selected so that Ctrl+C (⌘C) copies it, and the status line says so.
  function selectText(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest("[data-copy]");
    if (!button) return;
    var id = button.getAttribute("data-copy");
    var source = document.getElementById(id);
    if (!source) return;
    var status = document.querySelector('[data-copy-status="' + id + '"]');
    var text = source.textContent.trim();
    function say(message, state) {
      if (!status) return;
      status.textContent = message;
      status.setAttribute("data-state", state);
    }
    function fallBack() {
      selectText(source);
      say("Selected: press Ctrl+C (⌘C) to copy.", "selected");
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { say("Copied.", "copied"); }, fallBack);
    } else {
      fallBack();
    }
  });

  // --- numbers popovers ----------------------------------------------------------------------

  // A candidate's "numbers" (details[data-numbers]) are a native disclosure: Tab reaches the summary,
  // Enter or Space opens and a second click closes it. Here: one is open at a time, Escape closes it
  // (focus back on its summary) and so does a click outside it. In a table row
  // (data-numbers="row") the open panel spans the row under the row's own content and the row
  // grows to hold it, so it never covers the row below.
  var NUMBERS = "details[data-numbers]";
  var NUMBERS_GAP = 6;

  function openNumbers() {
    return Array.prototype.slice.call(document.querySelectorAll(NUMBERS + "[open]"));
  }

  function closeNumbers(details) {
    details.open = false;  // its toggle event gives the row back its height
  }

  // How far down (px from the top of the page) a cell's content reaches; for the numbers' own cell,
  // only its summary counts.
  function contentBottom(cell) {
    var summary = cell.querySelector(NUMBERS + " > summary");
    if (summary) return summary.getBoundingClientRect().bottom;
    var range = document.createRange();
    range.selectNodeContents(cell);
    var box = range.getBoundingClientRect();
    return box.height ? box.bottom : 0;
  }

  function unplace(row) {
    row.classList.remove("numbers-open");
    row.style.removeProperty("--numbers-top");
    Array.prototype.forEach.call(row.cells, function (cell) { cell.style.paddingBottom = ""; });
  }

  function placeInRow(details) {
    var row = details.closest("tr");
    var body = details.querySelector(".numbers-body");
    if (!row || !body) return;
    unplace(row);
    row.classList.add("numbers-open");
    var top = row.getBoundingClientRect().top;
    var bottom = top;
    Array.prototype.forEach.call(row.cells, function (cell) { bottom = Math.max(bottom, contentBottom(cell)); });
    // A cell of an earlier row spanning this one (rowspan) counts where its content reaches into it.
    var rowBox = row.getBoundingClientRect();
    Array.prototype.forEach.call(row.parentNode.querySelectorAll("td[rowspan]"), function (cell) {
      if (cell.parentNode === row) return;
      var box = cell.getBoundingClientRect();
      if (box.top >= rowBox.bottom || box.bottom <= rowBox.top) return;
      var reach = contentBottom(cell);
      if (reach > rowBox.top) bottom = Math.max(bottom, reach);
    });
    var panelTop = bottom - top + NUMBERS_GAP;
    row.style.setProperty("--numbers-top", panelTop + "px");
    var room = Math.max(0, panelTop + body.offsetHeight + NUMBERS_GAP - row.getBoundingClientRect().height);
    for (var attempt = 0; attempt < 3; attempt++) {
      Array.prototype.forEach.call(row.cells, function (cell) {
        if (cell.rowSpan <= 1) cell.style.paddingBottom = room + "px";
      });
      var short = body.getBoundingClientRect().bottom + NUMBERS_GAP - row.getBoundingClientRect().bottom;
      if (short <= 0.5) break;
      room += short;
    }
  }

  document.addEventListener("toggle", function (evt) {
    var details = evt.target;
    if (!details.matches || !details.matches(NUMBERS)) return;
    if (details.open) {
      openNumbers().forEach(function (other) { if (other !== details) closeNumbers(other); });
      if (details.getAttribute("data-numbers") === "row") placeInRow(details);
    } else {
      var row = details.closest("tr.numbers-open");
      if (row && !row.querySelector(NUMBERS + "[open]")) unplace(row);
    }
  }, true);

  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "Escape" || evt.defaultPrevented) return;
    var open = openNumbers();
    if (!open.length) return;
    open.forEach(closeNumbers);
    var summary = open[open.length - 1].querySelector("summary");
    if (summary) summary.focus();
  });

  document.addEventListener("click", function (evt) {
    openNumbers().forEach(function (details) {
      if (!details.contains(evt.target)) closeNumbers(details);
    });
  });

  // The panel's height follows the row's width.
  window.addEventListener("resize", function () {
    openNumbers().forEach(function (details) {
      if (details.getAttribute("data-numbers") === "row") placeInRow(details);
    });
  });
})();
