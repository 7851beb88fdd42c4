// The console's only script: follows a running job's output over
// server-sent events. Text goes in as text nodes (never HTML), in batches
// once per frame, and the oldest output is dropped past a cap, so that a
// fast writer cannot freeze the page.
"use strict";
(function () {
  const log = document.getElementById("log");
  if (!log || !log.dataset.events) return;
  const MAX = 400000; // characters kept on the page
  const escapes = /\x1b(\[[0-?]*[ -\/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])|[\x00-\x08\x0b-\x1f\x7f-\x9f]/g;
  let pending = [];
  let pendingLength = 0;
  let shown = 0;
  let scheduled = false;
  function flush() {
    scheduled = false;
    if (pending.length === 0) return;
    let text = pending.join("").replace(escapes, "");
    pending = [];
    pendingLength = 0;
    // One frame's worth past the cap: only its end can stay on the page.
    if (text.length > MAX) text = text.slice(text.length - MAX);
    const follow = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
    log.appendChild(document.createTextNode(text));
    shown += text.length;
    while (shown > MAX && log.firstChild !== log.lastChild) {
      shown -= log.firstChild.textContent.length;
      log.removeChild(log.firstChild);
    }
    if (follow) log.scrollTop = log.scrollHeight;
  }
  function schedule() {
    if (!scheduled) {
      scheduled = true;
      requestAnimationFrame(flush);
    }
  }
  log.textContent = "";
  const es = new EventSource(log.dataset.events);
  es.addEventListener("output", (e) => {
    const out = JSON.parse(e.data).output || "";
    pending.push(out);
    pendingLength += out.length;
    // A hidden tab gets no frames: keep no more than the page would show.
    while (pendingLength - pending[0].length > MAX) pendingLength -= pending.shift().length;
    schedule();
  });
  es.addEventListener("end", (e) => {
    es.close();
    flush();
    const end = JSON.parse(e.data);
    const st = document.getElementById("status");
    if (st) {
      st.textContent = end.status;
      st.className = "status st-" + end.status + (end.status === "exited" && end.exit_code ? " fail" : "");
    }
    const exit = document.getElementById("exit");
    if (exit && end.exit_code !== undefined && end.exit_code !== null) exit.textContent = String(end.exit_code);
    document.querySelectorAll(".controls").forEach((c) => c.remove());
    log.dataset.ended = end.status;
  });
  // "timeout": the stream's hour is up; the browser reconnects by itself
  // and the runner resumes after the last event's id.
  es.addEventListener("timeout", () => {});
  es.addEventListener("error", (e) => {
    if (e.data) {
      // The runner's own "error" event: following failed.
      es.close();
      const why = document.getElementById("log-state");
      if (why) why.textContent = "The live log stopped: " + (JSON.parse(e.data).error || "error");
      return;
    }
    // The connection's error: the browser retries unless it gave up (an
    // ended console session, a job gone) or the job has ended.
    if (log.dataset.ended || es.readyState === EventSource.CLOSED) {
      es.close();
      const why = document.getElementById("log-state");
      if (why && !log.dataset.ended) why.textContent = "The live log stopped; reload the page.";
    }
  });
})();

// The jobs page reloads itself while some job on it runs or waits in the
// queue, so that ends show up, unless someone is using a form on it or the
// tab is hidden.
(function () {
  const table = document.querySelector("table.jobs");
  if (!table || !table.querySelector("tr.st-running, tr.st-queued")) return;
  const busy = () =>
    document.hidden ||
    Array.from(document.querySelectorAll("form input:not([type=hidden]), form select")).some(
      (f) => f === document.activeElement || (f.name === "command" && f.value !== "")
    );
  setInterval(() => {
    if (!busy()) location.reload();
  }, 5000);
})();

// The login page of `hermes ui`: the one-time secret comes in the URL's
// fragment, which is never sent to a server; it is posted, then forgotten.
(function () {
  const token = document.getElementById("token");
  if (!token || location.hash.length < 2) return;
  token.value = decodeURIComponent(location.hash.slice(1));
  history.replaceState(null, "", location.pathname);
  token.form.submit();
})();
