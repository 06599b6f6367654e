// chainlang report: a click on a bar, a row or a step of the graph shows that attempt's
// details. Values are put in as text (textContent), never as markup.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var attempts = data.attempts;
  var panel = document.getElementById("detail");
  var title = document.getElementById("detail-title");
  var body = document.getElementById("detail-body");
  var lastOf = {};  // step path -> index of its last attempt
  attempts.forEach(function (a, i) { lastOf[a.step] = i; });

  function block(name, value) {
    if (value === null || value === undefined || (Array.isArray(value) && value.length === 0)) return;
    var h = document.createElement("h3");
    h.textContent = name;
    var pre = document.createElement("pre");
    pre.textContent = typeof value === "string" ? value : JSON.stringify(value, null, 2);
    pre.className = "detail-" + name.toLowerCase().replace(/[^a-z]+/g, "-");
    body.appendChild(h);
    body.appendChild(pre);
  }

  function ms(v) { return v === null || v === undefined ? "" : (v < 1000 ? v.toFixed(v < 10 ? 1 : 0) + " ms" : (v / 1000).toFixed(2) + " s"); }

  function open(i) {
    var a = attempts[i];
    if (!a) return;
    title.textContent = a.step + " " + a.event;
    body.textContent = "";
    var line = document.createElement("p");
    line.className = "detail-status";
    line.textContent = a.status + " · attempt " + a.attempt + (a.max ? "/" + a.max : "") +
      (a.duration_ms !== null ? " · " + ms(a.duration_ms) : "") + " · started +" + ms(a.start_ms) +
      (a.hook ? " · action of hook " + a.hook : "") + (a.reason ? " · " + a.reason : "");
    body.appendChild(line);
    block("Params", a.params);
    block("Result", a.status === "ok" ? a.result : null);
    block("Error", a.error);
    block("Decide", a.decide);
    block("Model calls", a.models);
    block("Progress", a.progress);
    panel.hidden = false;
    document.querySelectorAll(".selected").forEach(function (el) { el.classList.remove("selected"); });
    document.querySelectorAll('[data-i="' + i + '"]').forEach(function (el) { el.classList.add("selected"); });
    if (history.replaceState) history.replaceState(null, "", "#step=" + encodeURIComponent(a.step) + "&attempt=" + a.attempt);
  }

  document.addEventListener("click", function (e) {
    var t = e.target.closest("[data-i]");
    if (t) { open(Number(t.getAttribute("data-i"))); return; }
    var g = e.target.closest("[data-path]");
    if (g) {  // a step of the graph: its last attempt (the last item's, for a foreach)
      var path = g.getAttribute("data-path"), found = lastOf[path];
      if (found === undefined) {
        attempts.forEach(function (a, i) { if (a.step.indexOf(path + "[") === 0 || a.step.indexOf(path + "/") === 0) found = i; });
      }
      if (found !== undefined) open(found);
      return;
    }
    if (e.target.closest("[data-close]")) panel.hidden = true;
  });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") panel.hidden = true; });

  // zoom: the timeline's width, 1x to 256x the page's, kept centred on what was in view
  var inner = document.getElementById("chart-inner"), chart = inner.parentNode, zoom = 1;
  function setZoom(next) {
    next = Math.max(1, Math.min(256, next));
    var middle = (chart.scrollLeft + chart.clientWidth / 2) / inner.offsetWidth;
    zoom = next;
    inner.style.width = (zoom * 100) + "%";
    chart.scrollLeft = middle * inner.offsetWidth - chart.clientWidth / 2;
    document.getElementById("zoom-level").textContent = zoom + "\u00d7";
  }
  document.querySelectorAll("[data-zoom]").forEach(function (button) {
    button.addEventListener("click", function () {
      var how = button.getAttribute("data-zoom");
      setZoom(how === "in" ? zoom * 2 : how === "out" ? zoom / 2 : 1);
    });
  });

  function fromAddress() {  // #step=PATH&attempt=N: a link to an attempt
    var m = /step=([^&]*)(?:&attempt=(\d+))?/.exec(location.hash);
    if (!m) return;
    var step = decodeURIComponent(m[1]), want = m[2] ? Number(m[2]) : null;
    for (var i = attempts.length - 1; i >= 0; i--) {
      if (attempts[i].step === step && (want === null || attempts[i].attempt === want)) { open(i); return; }
    }
  }
  window.addEventListener("hashchange", fromAddress);
  fromAddress();
}());
