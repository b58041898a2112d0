// Pages that follow the queue while it moves: the dashboard, and the page
// of a job or a batch that has not finished. Every few seconds the page
// fetches itself again and puts its new #content-main in place: no reload,
// no framework, and without scripts a reload shows the same. The fetch is
// the page's own address, so it answers to the same login and the same
// permissions as the page; a page that stops being live (its job finished,
// or the user lost the right to see it) stops fetching.
"use strict";
(() => {
  const marker = () => document.querySelector("#content-main [data-dbqueue-live]");
  if (!marker()) {
    return;
  }
  const seconds = Number(marker().dataset.dbqueueLive) || 5;
  // Someone typing or choosing in the page: wait for them, do not wipe it.
  const inUse = () => {
    const active = document.activeElement;
    return active !== null && active.closest("#content-main input, #content-main select, #content-main textarea") !== null;
  };
  const say = (text) => {
    const shown = marker();
    if (shown !== null) {
      shown.textContent = text;
    }
  };
  const refresh = async () => {
    if (document.hidden || inUse()) {
      window.setTimeout(refresh, seconds * 1000);
      return;
    }
    try {
      const response = await fetch(window.location.href, {
        credentials: "same-origin",
        headers: {"X-Requested-With": "dbqueue-live"},
      });
      if (!response.ok || response.redirected) {
        say("No longer updating: reload the page.");
        return;
      }
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.querySelector("#content-main");
      const current = document.querySelector("#content-main");
      if (fresh === null || current === null) {
        return;
      }
      // What the reader opened (a collapsed fieldset, "Earlier runs") stays open.
      const opened = new Set(
        Array.from(current.querySelectorAll("details[open] > summary"), (summary) => summary.textContent),
      );
      const placed = document.importNode(fresh, true);
      for (const details of placed.querySelectorAll("details")) {
        const summary = details.querySelector(":scope > summary");
        if (summary !== null && opened.has(summary.textContent)) {
          details.open = true;
        }
      }
      current.replaceWith(placed);
      if (marker() === null) {
        return; // finished: the page as it now is stays
      }
    } catch (error) {
      // A network hiccup: try again at the next turn.
    }
    window.setTimeout(refresh, seconds * 1000);
  };
  window.setTimeout(refresh, seconds * 1000);
})();
