// AgentRein dashboard: the little script the pages need (the Content-Security-Policy allows no inline code).
"use strict";
(function () {
  // Countdowns: each [data-remaining] counts down from the seconds the server rendered.
  function left(seconds) {
    if (seconds <= 0) return "time is up";
    var d = Math.floor(seconds / 86400), h = Math.floor((seconds % 86400) / 3600);
    var m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    if (d) return d + "d " + h + "h left";
    if (h) return h + "h " + String(m).padStart(2, "0") + "m left";
    return m + "m " + String(s).padStart(2, "0") + "s left";
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-remaining]").forEach(function (el) {
      if (!el.dataset.deadline) el.dataset.deadline = String(now + Number(el.dataset.remaining) * 1000);
      var seconds = Math.max(0, Math.round((Number(el.dataset.deadline) - now) / 1000));
      el.textContent = left(seconds);
      el.classList.toggle("urgent", seconds < 60);
    });
  }
  document.addEventListener("DOMContentLoaded", tick);
  document.addEventListener("htmx:afterSettle", tick);
  setInterval(tick, 1000);

  // Sign-in cookies are Secure: the browser keeps them only in a secure context (HTTPS, or loopback).
  document.addEventListener("DOMContentLoaded", function () {
    var warning = document.getElementById("insecure-warning");
    if (warning && !window.isSecureContext) warning.hidden = false;
  });

  // After a decision, the card is replaced: put the focus on its outcome, so keyboard users stay in place.
  document.addEventListener("htmx:afterSettle", function () {
    var outcome = document.querySelector("[data-focus-after-swap]");
    if (outcome) {
      outcome.removeAttribute("data-focus-after-swap");
      outcome.focus();
    }
  });

  // Buttons with data-confirm ask before their (plain, non-htmx) form is sent.
  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    var question = button && button.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });
})();
