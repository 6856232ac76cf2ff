// lock-dashboard's only script (no dependencies, no build step): refreshes the page's <main>
// every `data-refresh` seconds of <body> (0: never), and shows each <time> in the browser's
// zone next to UTC.
(function () {
  "use strict";

  function localize(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      if (el.dataset.localized) return;
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at.getTime())) return;
      var local = document.createElement("span");
      local.className = "local";
      // (dateStyle and timeStyle cannot be combined with timeZoneName.)
      local.textContent = at.toLocaleString(undefined, {
        year: "numeric",
        month: "2-digit",
        day: "2-digit",
        hour: "2-digit",
        minute: "2-digit",
        second: "2-digit",
        timeZoneName: "short",
      });
      el.after(local);
      el.dataset.localized = "1";
    });
  }

  function refresh() {
    // Not while the page is hidden, nor under an operator's hand (a focused form).
    if (document.hidden) return;
    var active = document.activeElement;
    if (active && active.closest && active.closest("form")) return;
    fetch(location.href, { credentials: "same-origin" })
      .then(function (response) {
        return response.ok ? response.text() : null;
      })
      .then(function (text) {
        if (!text) return;
        var next = new DOMParser().parseFromString(text, "text/html");
        ["main", "footer"].forEach(function (part) {
          var old = document.querySelector(part);
          var fresh = next.querySelector(part);
          if (old && fresh) old.replaceWith(fresh);
        });
        localize(document);
      })
      .catch(function () {});
  }

  document.addEventListener("DOMContentLoaded", function () {
    var every = parseInt(document.body.dataset.refresh, 10);
    if (every > 0) setInterval(refresh, every * 1000);
    localize(document);
  });
})();
