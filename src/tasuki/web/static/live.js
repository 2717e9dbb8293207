// Live pages: every element with data-live (its value: milliseconds between polls) is
// replaced by the same element of this page fetched again, without a full reload.
// Polling stops while the tab is hidden and resumes (at once) when it is shown.
(function () {
  "use strict";
  var live = document.querySelector("[data-live]");
  if (!live) { return; }
  var every = Math.max(500, parseInt(live.getAttribute("data-live"), 10) || 2000);
  var timer = null;
  var busy = false;
  window.tasukiLive = { polls: 0 };

  function poll() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(window.location.href, { headers: { "X-Tasuki-Live": "1" }, credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) { throw new Error("status " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(live.id);
        var current = document.getElementById(live.id);
        if (fresh && current) { current.replaceWith(fresh); }
        window.tasukiLive.polls += 1;
      })
      .catch(function () { /* the dashboard is away: try again next time */ })
      .then(function () { busy = false; });
  }

  function start() { if (timer === null) { timer = window.setInterval(poll, every); } }
  function stop() { if (timer !== null) { window.clearInterval(timer); timer = null; } }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) { stop(); } else { poll(); start(); }
  });
  if (!document.hidden) { start(); }
})();
