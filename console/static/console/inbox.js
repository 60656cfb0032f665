/* The inbox's list (console.js first): rows that open into their card, live updates of one row
 * at a time, bulk decisions confirmed in a dialog, keyboard shortcuts. */
(function () {
  "use strict";
  var C = window.AirlockConsole, FRAGMENT = C.FRAGMENT, tick = C.tick;
  var updateCounts = C.updateCounts, keepAsNotice = C.keepAsNotice;
  var focusAfterDecision = C.focusAfterDecision;
  if (!document.getElementById("inbox")) return;

  function inbox() { return document.getElementById("inbox"); }
  function rowsList() { return document.querySelector("[data-rows]"); }
  function rowOf(id) { var l = rowsList(); return l && l.querySelector('[data-row="' + id + '"]'); }
  function allRows() { var l = rowsList(); return l ? Array.prototype.slice.call(l.children) : []; }

  function isBusy(card) {
    return card.hasAttribute("data-keep") || card.hasAttribute("data-dirty") ||
      card.hasAttribute("data-submitting") || card.contains(document.activeElement) ||
      !!card.querySelector("details.more[open]");
  }

  function showEmpty() {
    var empty = document.querySelector("[data-empty]");
    if (empty) empty.hidden = allRows().length > 0;
  }

  // Open a row into its card (fetched once); ``then`` gets the card.
  function openRow(row, then) {
    var slot = row.querySelector("[data-slot]"), link = row.querySelector("[data-open]");
    if (slot.firstElementChild) { if (then) then(slot.firstElementChild); return; }
    if (row.opening) { if (then) row.opening.push(then); return; }  // one fetch per opening
    row.opening = then ? [then] : [];
    fetch(link.href, { headers: FRAGMENT, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        var waiting = row.opening;
        row.opening = null;
        if (html === null) { row.remove(); showEmpty(); return; }
        slot.innerHTML = html;
        link.setAttribute("aria-expanded", "true");
        row.classList.add("open");
        tick();
        waiting.forEach(function (fn) { fn(slot.firstElementChild); });
      })
      .catch(function () { location.href = link.href; });
  }

  function closeRow(row) {
    row.querySelector("[data-slot]").replaceChildren();
    row.querySelector("[data-open]").setAttribute("aria-expanded", "false");
    row.classList.remove("open");
  }

  function rowNeighbour(row) {
    var all = allRows().filter(function (r) {
      return r === row || (!r.querySelector("[data-keep]") && !r.hasAttribute("data-held"));
    });
    var i = all.indexOf(row);
    return all[i + 1] || all[i - 1] || null;
  }

  // Sort keys are microseconds since the epoch; "" (no deadline) sorts last.
  function before(a, b, desc) {
    var x = a.getAttribute("data-key"), y = b.getAttribute("data-key");
    var nx = x === "" ? Infinity : Number(x), ny = y === "" ? Infinity : Number(y);
    if (nx === ny) return (a.getAttribute("data-row") < b.getAttribute("data-row")) !== desc;
    return (nx < ny) !== (desc && isFinite(nx) && isFinite(ny));
  }

  // A row that arrived live goes where the page's order puts it, if that is on this page.
  function insertRow(list, fresh) {
    var rows = allRows(), desc = list.getAttribute("data-desc") === "1";
    var firstPage = list.getAttribute("data-first-page") === "1";
    var hasNext = list.getAttribute("data-has-next") === "1";
    var at = rows.find(function (r) { return before(fresh, r, desc); });
    if (at === rows[0] && rows.length && !firstPage) return;  // belongs on an earlier page
    if (!at && hasNext) return;  // belongs on a later page
    list.insertBefore(fresh, at || null);
  }

  // The call left the list: keep its card if someone is working on it, else drop the row.
  function leave(row) {
    var card = row.querySelector("[data-card]");
    if (card && isBusy(card)) {
      if (!card.hasAttribute("data-keep") && !card.hasAttribute("data-submitting")) keepAsNotice(card);
      return;
    }
    var focused = row.contains(document.activeElement), next = focused && rowNeighbour(row);
    row.remove();
    showEmpty();
    if (next) next.querySelector("[data-open]").focus();
    updateBulkBar();
  }

  function placeRow(id, html) {
    var list = rowsList(), old = rowOf(id);
    if (!list || (old && old.hasAttribute("data-held"))) return;  // its decision waits to be sent
    if (!html) { if (old) leave(old); return; }
    var holder = document.createElement("template");
    holder.innerHTML = html.trim();
    var fresh = holder.content.firstElementChild;
    if (!old) { insertRow(list, fresh); showEmpty(); return; }
    // Keep what the operator has here: the opened card, the selection.
    var slot = old.querySelector("[data-slot]"), box = old.querySelector("[data-select]");
    var freshBox = fresh.querySelector("[data-select]");
    if (box && freshBox) freshBox.checked = box.checked;
    fresh.querySelector("[data-slot]").replaceWith(slot);
    if (old.classList.contains("open")) {
      fresh.classList.add("open");
      fresh.querySelector("[data-open]").setAttribute("aria-expanded", "true");
    }
    var hadFocus = old.querySelector("[data-open]") === document.activeElement;
    old.replaceWith(fresh);
    if (hadFocus) fresh.querySelector("[data-open]").focus();
    var card = slot.firstElementChild;
    if (card && !isBusy(card)) { slot.replaceChildren(); openRow(fresh); }  // its card, fresh
  }

  // One call changed: fetch its row for this page (204: it is no longer here).
  function updateRow(id) {
    var box = inbox();
    if (!box) return;
    var url = box.getAttribute("data-row-url").replace("tc_0", id) + "?" + box.getAttribute("data-query");
    fetch(url, { headers: FRAGMENT, credentials: "same-origin" })
      .then(function (r) {
        updateCounts(r);
        if (r.status === 204) return "";
        return r.ok ? r.text() : null;
      })
      .then(function (html) { if (html !== null) { placeRow(id, html); tick(); } })
      .catch(function () { /* the next event or re-check tries again */ });
  }

  // Every row of the page again (after a reconnect, or the occasional re-check): rows with an
  // opened card keep it.
  function refreshRows() {
    var box = inbox();
    if (!box) return;
    fetch(box.getAttribute("data-rows-src"), { headers: FRAGMENT, credentials: "same-origin", cache: "no-cache" })
      .then(function (r) { updateCounts(r); return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var next = document.createElement("div");
        next.innerHTML = html;
        var list = next.querySelector("[data-rows]");
        allRows().forEach(function (old) {
          var id = old.getAttribute("data-row"), fresh = list.querySelector('[data-row="' + id + '"]');
          var card = old.querySelector("[data-card]");
          if (old.hasAttribute("data-held")) { if (fresh) fresh.replaceWith(old); else list.prepend(old); }
          else if (fresh && (card || old.contains(document.activeElement))) fresh.replaceWith(old);
          else if (!fresh && card && isBusy(card)) {
            if (!card.hasAttribute("data-keep")) keepAsNotice(card);
            list.prepend(old);
          } else if (fresh) {
            var box = old.querySelector("[data-select]"), freshBox = fresh.querySelector("[data-select]");
            if (box && freshBox) freshBox.checked = box.checked;
          }
        });
        box.replaceChildren.apply(box, Array.prototype.slice.call(next.childNodes));
        showEmpty();
        updateBulkBar();
        tick();
      })
      .catch(function () { /* the next event or re-check tries again */ });
  }

  // --- bulk decisions ------------------------------------------------------------------------

  function updateBulkBar() {
    var bar = document.querySelector("[data-bulk]");
    if (!bar) return;
    var picked = Array.prototype.slice.call(document.querySelectorAll("[data-select]:checked"));
    var tools = picked.map(function (b) { return b.closest("[data-row]").getAttribute("data-tool"); })
      .filter(function (t, i, all) { return all.indexOf(t) === i; }).sort();
    var status = bar.querySelector("[data-bulk-status]");
    if (!picked.length) status.textContent = "Tick calls of one tool to decide them together.";
    else if (tools.length > 1) status.textContent = "Select calls of one tool (now: " + tools.join(", ") + ").";
    else status.textContent = picked.length + " selected: " + tools[0];
    bar.querySelectorAll("[data-bulk-button]").forEach(function (b) {
      b.disabled = !picked.length || tools.length > 1;
    });
  }

  function bulkDialog(html) {
    var dialog = document.getElementById("bulk-dialog");
    dialog.innerHTML = html;
    if (!dialog.open) dialog.showModal();
    var results = dialog.querySelectorAll("[data-result-id]");
    results.forEach(function (li) {
      var box = document.querySelector('[data-select][value="' + li.getAttribute("data-result-id") + '"]');
      if (box) box.checked = false;
      updateRow(li.getAttribute("data-result-id"));
    });
    updateBulkBar();
    // A rejection without a reason comes back asking for it: the reason first.
    var first = dialog.querySelector("[data-bulk-reason]") ||
      dialog.querySelector("button[type=submit]:not([data-bulk-close])") || dialog.querySelector("button");
    if (first) first.focus();
  }

  // --- console.js's hooks -------------------------------------------------------------------

  C.hooks.event = function (msg) {
    // Only the changed row: an idle inbox never downloads the whole list again. A call settled
    // elsewhere still changes the counts: its (empty) answer carries them.
    var news = msg.event === "approval_requested" || msg.event === "approval_settled";
    if (msg.call_id && (rowOf(msg.call_id) || news)) updateRow(msg.call_id);
    return true;
  };

  C.hooks.reconnected = function () { refreshRows(); return true; };

  C.hooks.expired = function (el) {
    var row = el.closest("[data-row]");
    if (!row) return false;
    setTimeout(function () { updateRow(row.getAttribute("data-row")); }, 1500);
    return true;
  };

  C.hooks.dismissed = function (card) {
    var row = card.closest("[data-row]");
    if (!row) return false;
    row.remove();
    showEmpty();
    updateRow(row.getAttribute("data-row"));  // back if still pending
    return true;
  };

  C.hooks.decided = function (card, form, area) {
    var row = card && card.closest("[data-row]");
    if (!row) return false;
    if (form.getAttribute("data-attempt") === "extension") {  // still pending: fresh row and card
      row.querySelector("[data-slot]").replaceChildren();
      openRow(row);
      updateRow(row.getAttribute("data-row"));
      return true;
    }
    // The row goes; the next one opens into its card, the focus on the row itself (never its
    // Approve: Enter twice must not decide two calls).
    var nextRow = rowNeighbour(row);
    row.remove();
    showEmpty();
    updateBulkBar();
    if (nextRow) {
      nextRow.querySelector("[data-open]").focus();
      openRow(nextRow);
    } else focusAfterDecision(null, area);
    updateRow(row.getAttribute("data-row"));  // the counts (and the row, were it back)
    return true;
  };

  // The undo window (console.js): the row is set aside while its decision waits.
  C.hooks.holder = function (card) { return card.closest("[data-row]"); };

  C.hooks.setAside = function (row) {
    if (!row) return;
    var nextRow = rowNeighbour(row);
    updateBulkBar();
    if (nextRow) { nextRow.querySelector("[data-open]").focus(); openRow(nextRow); }
    else focusAfterDecision(null, document.getElementById("flash-area"));
  };

  C.hooks.sent = function (card) {
    var row = card.closest("[data-row]");
    if (!row) { card.remove(); return; }
    row.remove();
    showEmpty();
    updateBulkBar();
    updateRow(row.getAttribute("data-row"));  // the counts (and the row, were it back)
  };

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.hasAttribute("data-bulk") && !form.hasAttribute("data-bulk-confirm")) return;
    e.preventDefault();
    // getAttribute: the form's field named "action" shadows the form's own property.
    fetch(form.getAttribute("action"), {
      method: "POST", body: new FormData(form, e.submitter), headers: FRAGMENT, credentials: "same-origin"
    })
      .then(function (r) { return r.text(); })
      .then(bulkDialog)
      .catch(function () { form.submit(); });
  });

  document.addEventListener("click", function (e) {
    var open = e.target.closest && e.target.closest("[data-open]");
    if (!open || e.ctrlKey || e.metaKey || e.shiftKey) return;  // a new tab: the card's page
    e.preventDefault();
    var row = open.closest("[data-row]");
    if (row.classList.contains("open")) closeRow(row); else openRow(row);
  });

  document.addEventListener("change", function (e) {
    if (e.target.hasAttribute && e.target.hasAttribute("data-select")) updateBulkBar();
  });

  // Keyboard shortcuts on the inbox: j / k move between rows, x selects (Shift+x: a range), a
  // approves, r opens the rejection, e the edit, / the search, ? shows the list. Never while
  // typing, never with a modifier key but Shift.
  function currentRow() {
    return document.activeElement && document.activeElement.closest &&
      document.activeElement.closest("[data-row]");
  }

  var lastPicked = null;

  function selectRange(row) {
    var all = allRows(), to = all.indexOf(row), from = all.indexOf(lastPicked);
    if (from < 0) from = to;
    all.slice(Math.min(from, to), Math.max(from, to) + 1).forEach(function (r) {
      var box = r.querySelector("[data-select]");
      if (box && !r.hasAttribute("data-held")) box.checked = true;
    });
    lastPicked = row;
    updateBulkBar();
  }

  function moveTo(step) {
    var all = allRows();
    if (!all.length) return;
    var i = all.indexOf(currentRow());
    var next = all[i < 0 ? 0 : Math.max(0, Math.min(all.length - 1, i + step))];
    var link = next.querySelector("[data-open]");
    link.focus();
    link.scrollIntoView({ block: "nearest" });
  }

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target;
    if (t.closest && t.closest("input, textarea, select, [contenteditable], dialog")) return;
    var help = document.getElementById("shortcuts"), row = currentRow();
    var search = document.querySelector('.list-controls input[type="search"]');
    if (e.key === "/" && search) search.focus();
    else if (e.key === "?") {
      if (help && !help.open) help.showModal(); else if (help) help.close();
    } else if (e.key === "j") moveTo(1);
    else if (e.key === "k") moveTo(-1);
    else if (e.key === "x" && row && row.querySelector("[data-select]")) {
      var box = row.querySelector("[data-select]");
      box.checked = !box.checked;
      updateBulkBar();
      lastPicked = row;
    } else if (e.key === "X" && row && row.querySelector("[data-select]")) {
      selectRange(row);  // Shift+x: every row from the last one picked to this one
    } else if (e.key === "e" && row) {
      openRow(row, function (card) {
        var edit = card && card.querySelector("details.more form[data-attempt=edit]");
        if (!edit) return;
        edit.closest("details").open = true;
        edit.querySelector("textarea").focus();
      });
    } else if (e.key === "a" && row) {
      openRow(row, function (card) {
        var approve = card && card.querySelector('form[action$="/approve/"] button');  // plain Approve first
        if (approve) approve.click();
      });
    } else if (e.key === "r" && row) {
      openRow(row, function (card) {
        var reject = card && card.querySelector("details.more form[data-attempt=rejection]");
        if (!reject) return;
        reject.closest("details").open = true;
        reject.querySelector("textarea, input[type=text]").focus();
      });
    } else return;
    e.preventDefault();
  });

  document.addEventListener("DOMContentLoaded", function () {
    updateBulkBar();
    // A safety net for lost events: the page re-checks its rows (a 304 when nothing changed).
    setInterval(refreshRows, 60000);
  });
})();
