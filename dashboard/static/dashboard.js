// jobpipe dashboard: refreshes the overview's counts. The page works without it.
(function () {
  "use strict";
  var table = document.getElementById("summary");
  if (!table || !window.fetch) {
    return;
  }
  var url = table.getAttribute("data-url");
  var interval = parseInt(table.getAttribute("data-interval"), 10) || 2000;
  var stamp = document.getElementById("refreshed");

  function rowsByKind() {
    var rows = {};
    table.querySelectorAll("tbody tr[data-kind]").forEach(function (tr) {
      rows[tr.getAttribute("data-kind")] = tr;
    });
    return rows;
  }

  function apply(data) {
    var rows = rowsByKind();
    var kinds = data.kinds || [];
    if (kinds.length !== Object.keys(rows).length || kinds.some(function (k) { return !rows[k.kind]; })) {
      window.location.reload(); // kinds came or went: the server renders the new table
      return;
    }
    kinds.forEach(function (k) {
      var tr = rows[k.kind];
      tr.querySelectorAll("[data-field]").forEach(function (cell) {
        var field = cell.getAttribute("data-field");
        if (Object.prototype.hasOwnProperty.call(k.text, field)) {
          cell.textContent = k.text[field];
        }
      });
      var failed = tr.querySelector('[data-field="failed"]');
      if (failed) {
        failed.classList.toggle("bad", k.failed > 0);
      }
      var status = tr.querySelector('[data-field="status"]');
      if (status) {
        status.className = "badge badge-" + k.status_class;
      }
    });
    if (data.poll_interval_ms > 0) {
      interval = data.poll_interval_ms;
    }
    if (stamp) {
      stamp.textContent = " (last at " + new Date(data.generated_at).toLocaleTimeString() + ")";
    }
    table.setAttribute("data-refreshed", data.generated_at);
  }

  function poll() {
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (resp) {
        if (!resp.ok) {
          throw new Error("HTTP " + resp.status);
        }
        return resp.json();
      })
      .then(apply)
      .catch(function (err) {
        if (stamp) {
          stamp.textContent = " (refresh failed: " + err.message + ")";
        }
      })
      .then(function () {
        window.setTimeout(poll, interval);
      });
  }
  window.setTimeout(poll, interval);
})();
