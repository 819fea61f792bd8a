// Draw the page's charts (data in <script class="chart-data">) with the vendored uPlot.
// Categories on x are drawn at 0..n-1 and labelled by name; nothing is fetched.
(function () {
  "use strict";
  var palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf"];
  var RINGS = [16, 11, 7, 4]; // marker sizes, series by series
  window.torchportCharts = {};

  function label(spec) {
    return function (u, splits) {
      return splits.map(function (i) {
        return Number.isInteger(i) && i >= 0 && i < spec.x.length ? spec.x[i] : "";
      });
    };
  }

  function longest(labels) {
    return labels.reduce(function (n, s) { return Math.max(n, String(s).length); }, 0);
  }

  function draw(spec) {
    var target = document.getElementById("chart-" + spec.id);
    if (!target || typeof uPlot === "undefined") return;
    var xs = spec.x.map(function (_, i) { return i; });
    var lines = spec.kind === "lines";
    var series = [{ label: spec.x_title, value: function (u, i) { return i == null ? "-" : spec.x[i]; } }];
    spec.series.forEach(function (s, k) {
      var colour = palette[k % palette.length];
      series.push({
        label: s.label,
        stroke: colour,
        width: lines ? 2 : 0,
        paths: lines ? undefined : function () { return null; },
        // Later series smaller: equal values (100% at every stage) stay visible as rings.
        points: { show: true, size: lines ? 6 : RINGS[k % RINGS.length], fill: colour, stroke: colour },
        spanGaps: true,
      });
    });
    var opts = {
      width: Math.max(320, Math.min(target.clientWidth || 640, 900)),
      height: 280,
      legend: { show: true },
      scales: {
        x: { time: false, range: [-0.5, Math.max(xs.length - 0.5, 0.5)] },
        y: spec.log_y ? { distr: 3, log: 10 } : spec.y_range ? { range: spec.y_range } : { auto: true },
      },
      axes: [
        // Room for the longest category label, so neighbours never overlap.
        { label: spec.x_title, values: label(spec), space: Math.max(40, 7 * longest(spec.x) + 12), incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] },
        { label: spec.y_title, size: 70, labelSize: 24 },
      ],
      series: series,
    };
    var data = [xs].concat(spec.series.map(function (s) { return s.values; }));
    window.torchportCharts[spec.id] = new uPlot(opts, data, target);
  }

  document.querySelectorAll("script.chart-data").forEach(function (el) {
    JSON.parse(el.textContent).forEach(draw);
  });
})();
