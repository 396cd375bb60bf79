// Live updates of a console page: the server sends the page's fragments over server-sent events
// (suanli.console.server.events), each an element id and its new inner HTML, rendered and escaped on
// the server; this swaps them in. No framework, no build step: the file is served as it is.
"use strict";

(function () {
  const main = document.querySelector("main[data-stream]");
  const status = document.getElementById("live-status");
  if (!main || !window.EventSource) {
    return;
  }
  const show = (text, state) => {
    if (status) {
      status.textContent = text;
      status.dataset.state = state;
    }
  };
  const source = new EventSource(main.dataset.stream);
  source.addEventListener("update", (message) => {
    const fragments = JSON.parse(message.data);
    for (const [id, html] of Object.entries(fragments)) {
      const element = document.getElementById(id);
      if (element) {
        element.innerHTML = html;
      }
    }
    show("live · updated " + new Date().toLocaleTimeString(), "live");
  });
  source.addEventListener("gone", () => {
    source.close();
    show("this page is gone", "gone");
  });
  source.addEventListener("open", () => show("live", "live"));
  // EventSource reconnects by itself (after the server's `retry:`); a 401 (the session expired)
  // closes it for good, hence the reload to the login form.
  source.addEventListener("error", () => {
    if (source.readyState === EventSource.CLOSED) {
      window.location.reload();
    } else {
      show("reconnecting…", "down");
    }
  });
})();
