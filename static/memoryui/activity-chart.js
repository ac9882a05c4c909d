// memoryui: the dashboard's activity chart. Memories created, recalled, tombstoned and merged per
// day, drawn with uPlot (uplot-1.6.32.min.js, loaded before this file) from the JSON the page
// embeds with json_script. The same numbers are in the table under the chart, which is what a
// screen reader (and a browser without JavaScript) gets. uPlot sets sizes through the style
// object only, never a style attribute or a <style> element, so the Content-Security-Policy holds.
(function () {
  "use strict";

  var HEIGHT = 220;
  var SERIES = [
    { name: "created", label: "Created", stroke: "#2f5bd3" },
    { name: "recalled", label: "Recalled", stroke: "#18794e" },
    { name: "tombstoned", label: "Tombstoned", stroke: "#c0352b" },
    { name: "merged", label: "Merged", stroke: "#a15c00" },
  ];

  // A point on the days something happened only: thirty dots a series along zero hide each other.
  function counted(u, seriesIndex) {
    var days = [];
    u.data[seriesIndex].forEach(function (n, i) { if (n) days.push(i); });
    return days;
  }

  function draw(holder) {
    var source = document.getElementById(holder.dataset.activityChart);
    if (!source || holder.dataset.drawn || typeof window.uPlot !== "function") return;
    var chart = JSON.parse(source.textContent);
    // Days are dates in the server's time zone: drawn at UTC midnight and labelled in UTC, so the
    // browser's own zone never shifts a count to the day before.
    var days = chart.days.map(function (day) { return Date.parse(day + "T00:00:00Z") / 1000; });
    var data = [days].concat(SERIES.map(function (s) { return chart.series[s.name]; }));
    var options = {
      width: Math.max(holder.clientWidth, 200),
      height: HEIGHT,
      tzDate: function (ts) { return window.uPlot.tzDate(new Date(ts * 1000), "Etc/UTC"); },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: { time: true },
        y: { range: function (u, min, max) { return [0, Math.max(4, Math.ceil(max * 1.1))]; } },
      },
      axes: [
        { stroke: "#667085", grid: { stroke: "#e3e6eb" }, ticks: { stroke: "#e3e6eb" } },
        {
          stroke: "#667085",
          grid: { stroke: "#e3e6eb" },
          ticks: { stroke: "#e3e6eb" },
          incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000],
          values: function (u, ticks) { return ticks.map(function (v) { return String(v); }); },
        },
      ],
      series: [{ label: "Day", value: "{YYYY}-{MM}-{DD}" }].concat(
        SERIES.map(function (s) {
          return { label: s.label, stroke: s.stroke, width: 2, points: { show: false, filter: counted, size: 6, fill: s.stroke } };
        })
      ),
    };
    var plot = new window.uPlot(options, data, holder);
    holder.dataset.drawn = "true";
    if (typeof ResizeObserver === "function") {
      var width = holder.clientWidth;
      new ResizeObserver(function () {
        if (holder.clientWidth !== width && holder.isConnected) {
          width = holder.clientWidth;
          plot.setSize({ width: Math.max(width, 200), height: HEIGHT });
        }
      }).observe(holder);
    }
  }

  function drawAll(root) {
    var scope = root && root.querySelectorAll ? root : document;
    if (scope.matches && scope.matches("[data-activity-chart]")) draw(scope);
    scope.querySelectorAll("[data-activity-chart]").forEach(draw);
  }

  // On the page, and again on the panel htmx swaps in (the scope selector, Refresh).
  document.addEventListener("DOMContentLoaded", function () { drawAll(document); });
  document.addEventListener("htmx:load", function (evt) { drawAll(evt.detail.elt); });
})();
