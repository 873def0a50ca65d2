// fedctl dashboard: keeps the page's live part current. The server sends that part again,
// rendered and escaped on the server, each time the hub changes (server-sent events).
// No framework, no build step; the CSP allows this file and nothing inline.
"use strict";

(function () {
  const live = document.getElementById("live");
  const status = document.getElementById("live-status");
  if (!live || !window.EventSource) {
    return;
  }
  // The page the server says this is: a refused action is answered at its POST URL,
  // whose live part is the Application's page.
  const named = document.querySelector('meta[name="live-page"]');
  const page = named ? named.content : window.location.pathname + window.location.search;
  const source = new EventSource("/stream?page=" + encodeURIComponent(page));
  let connected = null;

  function say(text) {
    if (status && status.textContent !== text) {
      status.textContent = text;
    }
  }

  source.onopen = function () {
    if (connected === false) {
      say("live updates resumed");
    }
    connected = true;
    document.body.dataset.live = "connected";
  };
  source.onerror = function () {
    connected = false;
    document.body.dataset.live = "reconnecting";
    say("live updates interrupted, reconnecting");
  };
  source.onmessage = function (event) {
    // Keep keyboard focus on the same control when its part is replaced.
    const focused = document.activeElement;
    const focusId = focused && live.contains(focused) ? focused.id : "";
    // The server escaped every value it was given (federation/dashboard/html.py).
    live.innerHTML = event.data;
    document.body.dataset.updated = String(Date.now());
    if (focusId) {
      const again = document.getElementById(focusId);
      if (again) {
        again.focus();
      }
    }
  };
})();
