// malaunch ui: refresh the parts of a job's page while it runs, and follow a log. Every text from the server
// goes in as textContent (log lines) or as HTML the server escaped (parts); nothing else is inserted.
"use strict";
(function () {
  const live = document.body.dataset.live === "1";
  const parts = document.querySelectorAll("[data-part]");
  let refresher = null;
  function refresh() {
    parts.forEach(function (el) {
      fetch(el.dataset.part, {credentials: "same-origin"})
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          if (html === null) return;
          el.innerHTML = html;
          if (el.id === "summary" && el.querySelector("[data-ended]")) { clearInterval(refresher); setTimeout(refresh, 1000); }
        });
    });
  }
  if (live && parts.length) refresher = setInterval(refresh, 2000);

  const log = document.getElementById("log");
  if (!log) return;
  const file = document.getElementById("logfile"), search = document.getElementById("logsearch");
  const follow = document.getElementById("follow");
  let offset = 0, timer = null, round = 0, failed = false;
  function poll() {
    const mine = round;
    const url = log.dataset.src + "&file=" + encodeURIComponent(file.value) + "&offset=" + offset +
      "&q=" + encodeURIComponent(search.value);
    fetch(url, {credentials: "same-origin"}).then(function (r) { return r.json(); }).then(function (d) {
      if (mine !== round) return;
      if (d.error) {  // shown in place; a running job's may pass (its status read while it changed): ask again
        log.textContent = d.error; failed = true; offset = 0;
        if (live) timer = setTimeout(poll, 2000);
        return;
      }
      if (failed) { log.textContent = ""; failed = false; }
      offset = d.offset;
      d.lines.forEach(function (line) {
        const div = document.createElement("div");
        div.textContent = line;
        log.appendChild(div);
      });
      while (log.childElementCount > 5000) log.firstChild.remove();
      if (d.lines.length && follow.checked) log.scrollTop = log.scrollHeight;
      if (d.lines.length || d.live) timer = setTimeout(poll, d.lines.length ? 50 : 400);
    }).catch(function () { if (mine === round) timer = setTimeout(poll, 2000); });
  }
  function restart() { round++; clearTimeout(timer); offset = 0; log.textContent = ""; poll(); }
  file.addEventListener("change", restart);
  search.addEventListener("input", restart);
  poll();
})();
