/* Airlock console: progressive enhancement, no build step.
 * - live: a WebSocket tells the page that something changed; the page refetches its fragments
 *   (elements with data-live-src) and, on a run's page, appends the run's new stream frames;
 *   the inbox fetches only the row of the call that changed (data-row-url) and puts it in place;
 * - inbox rows open into their card (fetched on opening); bulk decisions confirm in a dialog;
 * - forms marked data-fragment are sent with fetch and their card is updated in place;
 * - relative times and expiry countdowns tick.
 * Without JavaScript every form still works as a normal POST and a reload shows the news. */
(function () {
  "use strict";
  var FRAGMENT = { "X-Console-Fragment": "1" };
  var refreshTimer = null;

  function relative(date) {
    var s = Math.round((Date.now() - date.getTime()) / 1000), future = s < 0;
    s = Math.abs(s);
    var text = s < 45 ? "just now" : s < 3600 ? Math.round(s / 60) + " min" :
      s < 86400 ? Math.round(s / 3600) + " h" : Math.round(s / 86400) + " days";
    if (text === "just now") return text;
    return future ? "in " + text : text + " ago";
  }

  function countdown(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (h) return h + " h " + m + " min";
    return m + ":" + String(sec).padStart(2, "0");
  }

  function tick() {
    document.querySelectorAll("time[data-relative]").forEach(function (el) {
      el.textContent = relative(new Date(el.getAttribute("datetime")));
    });
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var left = new Date(el.getAttribute("data-countdown")).getTime() - Date.now();
      if (left <= 0) {
        if (!el.classList.contains("gone")) {
          el.classList.add("gone");
          var row = el.closest("[data-row]");
          if (row) setTimeout(function () { updateRow(row.getAttribute("data-row")); }, 1500);
          else scheduleRefresh(1500);
        }
        el.textContent = "expired";
      } else {
        el.textContent = "expires in " + countdown(left);
        el.classList.toggle("urgent", left < 60000);
      }
    });
  }

  function updateCounts(response) {
    var header = response.headers.get("X-Console-Counts");
    if (!header) return;
    header.split(";").forEach(function (pair) {
      var kv = pair.split("="), el = document.querySelector('[data-count="' + kv[0] + '"]');
      if (!el) return;
      el.textContent = kv[1];
      el.classList.toggle(kv[0] === "in_doubt" ? "warn" : "hot", kv[1] !== "0");
    });
  }

  function merge(target, html) {
    // Keep what the operator is in the middle of: a refused card, a form opened or typed into.
    var next = document.createElement("div");
    next.innerHTML = html;
    target.querySelectorAll("[data-card]").forEach(function (old) {
      var busy = old.hasAttribute("data-keep") || old.hasAttribute("data-dirty") ||
        old.hasAttribute("data-submitting") ||
        old.contains(document.activeElement) || old.querySelector("details.more[open]");
      if (!busy) return;
      var fresh = next.querySelector('[data-card="' + old.getAttribute("data-card") + '"]');
      if (fresh) { fresh.replaceWith(old); return; }
      // Our own decision in flight: its answer removes the card or shows the refusal on it.
      if (!old.hasAttribute("data-keep") && !old.hasAttribute("data-submitting")) keepAsNotice(old);
      var section = next.querySelector("section") || next;
      var heading = section.querySelector("h2");
      if (heading && heading.nextSibling) section.insertBefore(old, heading.nextSibling.nextSibling);
      else section.prepend(old);
    });
    target.replaceChildren.apply(target, Array.prototype.slice.call(next.childNodes));
  }

  // A card someone was working on left the list (decided elsewhere): keep it, with what they
  // typed, and say what happened instead of letting it vanish.
  function keepAsNotice(card) {
    var busy = card.querySelector("details.more[open] form[data-attempt]");
    var what = card.getAttribute("data-working-on") ||
      (busy && busy.getAttribute("data-attempt")) || "decision";
    card.setAttribute("data-keep", "");
    card.classList.add("refused");
    card.querySelectorAll("form button").forEach(function (b) { b.disabled = true; });
    var note = document.createElement("div");
    note.className = "flash error"; note.setAttribute("role", "alert");
    note.setAttribute("data-refusal", ""); note.setAttribute("data-notice", "");
    var text = document.createElement("span");
    text.textContent = "This was decided elsewhere — your " + what + " was not sent.";
    var dismiss = document.createElement("button");
    dismiss.type = "button"; dismiss.className = "link"; dismiss.textContent = "Dismiss";
    dismiss.setAttribute("data-dismiss", "");
    note.append(text, dismiss);
    var head = card.querySelector(".card-head");
    if (head) head.after(note); else card.prepend(note);
    var src = card.getAttribute("data-state-src");
    if (!src) return;
    fetch(src, { headers: FRAGMENT, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (said) {
        if (said) text.textContent = said + " Your " + what + " was not sent.";
      })
      .catch(function () { /* the generic notice stays */ });
  }

  // The card to work on once this one is decided: the next one, else the one before.
  function neighbour(card) {
    var all = Array.prototype.slice.call(document.querySelectorAll("[data-card]:not([data-keep])"));
    var i = all.indexOf(card);
    return all[i + 1] || all[i - 1] || null;
  }

  // --- the inbox's rows ----------------------------------------------------------------------

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
    var all = allRows().filter(function (r) { return r === row || !r.querySelector("[data-keep]"); });
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
    if (!list) return;
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
          if (fresh && (card || old.contains(document.activeElement))) fresh.replaceWith(old);
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
    var first = dialog.querySelector("button[type=submit]:not([data-bulk-close])") || dialog.querySelector("button");
    if (first) first.focus();
  }

  // Keyboard focus must not fall to <body> when the focused card leaves the page.
  function focusAfterDecision(next, area) {
    var target = next && (next.querySelector("button.primary:not([disabled])") ||
      next.querySelector("button:not([disabled]), summary"));
    if (!target && area && area.firstElementChild) {
      target = area.firstElementChild;
      target.setAttribute("tabindex", "-1");
    }
    if (target) target.focus();
  }

  // One refresh at a time: a response that arrives late must never overwrite a newer one.
  var inFlight = false, again = false;

  function refresh() {
    refreshTimer = null;
    if (inFlight) { again = true; return; }
    inFlight = true;
    var jobs = Array.prototype.map.call(document.querySelectorAll("[data-live-src]"), function (el) {
      return fetch(el.getAttribute("data-live-src"), { headers: FRAGMENT, credentials: "same-origin" })
        .then(function (r) { updateCounts(r); return r.ok ? r.text() : null; })
        .then(function (html) { if (html !== null) { merge(el, html); tick(); } });
    });
    Promise.all(jobs).catch(function () { /* the next event or poll tries again */ }).then(function () {
      inFlight = false;
      if (again) { again = false; scheduleRefresh(0); }
    });
  }

  function scheduleRefresh(delay) {
    if (refreshTimer) return;
    refreshTimer = setTimeout(refresh, delay === undefined ? 120 : delay);
  }

  function appendFrames(frames) {
    var list = document.getElementById("frames");
    if (!list) return;
    var last = parseInt(list.getAttribute("data-last-seq") || "0", 10);
    frames.forEach(function (f) {
      if (f.seq <= last) return;
      var li = document.createElement("li");
      li.value = f.seq; li.setAttribute("data-seq", f.seq); li.className = "fresh";
      var kind = document.createElement("span"); kind.className = "kind"; kind.textContent = f.kind;
      var data = document.createElement("code"); data.className = "frame-data";
      data.textContent = JSON.stringify(f.data, null, 1).replace(/\n\s*/g, " ");
      li.append(kind, " ", data);
      list.append(li);
      last = f.seq;
    });
    list.setAttribute("data-last-seq", String(last));
    list.scrollTop = list.scrollHeight;
    var empty = document.querySelector("[data-frames-empty]");
    if (empty) empty.remove();
  }

  function connect(attempt) {
    if (!document.body.hasAttribute("data-live")) return;
    var status = document.querySelector("[data-live-status]");
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    if (status) status.hidden = false;
    var socket = new WebSocket(scheme + location.host + document.body.getAttribute("data-ws"));
    socket.onopen = function () {
      attempt = 0;
      if (status) { status.textContent = "live"; status.classList.add("on"); }
      if (document.body.hasAttribute("data-connected-once")) {  // missed news
        if (inbox()) refreshRows(); else scheduleRefresh();
      }
      document.body.setAttribute("data-connected-once", "");
      document.body.setAttribute("data-socket", "open");
    };
    socket.onmessage = function (e) {
      var msg = JSON.parse(e.data);
      if (msg.type === "frames") appendFrames(msg.frames);
      if (inbox()) {
        // Only the changed row: an idle inbox never downloads the whole list again.
        // A call settled elsewhere still changes the counts: its (empty) answer carries them.
        var news = msg.event === "approval_requested" || msg.event === "approval_settled";
        if (msg.call_id && (rowOf(msg.call_id) || news)) updateRow(msg.call_id);
        return;
      }
      scheduleRefresh();
    };
    socket.onclose = function () {
      document.body.setAttribute("data-socket", "closed");
      if (status) { status.textContent = "reconnecting…"; status.classList.remove("on"); }
      setTimeout(function () { connect(attempt + 1); }, Math.min(15000, 500 * Math.pow(2, attempt)));
    };
  }

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (form.hasAttribute("data-bulk") || form.hasAttribute("data-bulk-confirm")) {
      e.preventDefault();
      // getAttribute: the form's field named "action" shadows the form's own property.
      fetch(form.getAttribute("action"), { method: "POST", body: new FormData(form, e.submitter), headers: FRAGMENT, credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(bulkDialog)
        .catch(function () { form.submit(); });
      return;
    }
    if (!form.hasAttribute("data-fragment")) return;
    e.preventDefault();
    var card = form.closest("[data-card]");
    if (card) card.setAttribute("data-submitting", "");
    form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    fetch(form.action, { method: "POST", body: new FormData(form), headers: FRAGMENT, credentials: "same-origin" })
      .then(function (r) { return r.text().then(function (html) { return { ok: r.ok, html: html }; }); })
      .then(function (res) {
        if (res.ok) {
          var area = document.getElementById("flash-area");
          if (area) area.insertAdjacentHTML("afterbegin", res.html);
          var row = card && card.closest("[data-row]");
          if (row && form.getAttribute("data-attempt") === "extension") {  // still pending
            row.querySelector("[data-slot]").replaceChildren();
            openRow(row);
            updateRow(row.getAttribute("data-row"));
            return;
          }
          if (row) {  // the inbox: the row goes, the next one opens with its Approve focused
            var nextRow = rowNeighbour(row);
            row.remove();
            showEmpty();
            updateBulkBar();
            if (nextRow) {
              nextRow.querySelector("[data-open]").focus();  // at once: never <body>
              openRow(nextRow, function (c) { focusAfterDecision(c, area); });
            }
            else focusAfterDecision(null, area);
            updateRow(row.getAttribute("data-row"));  // the counts (and the row, were it back)
            return;
          }
          var next = card && neighbour(card);
          if (card) card.remove();
          focusAfterDecision(next, area);
          scheduleRefresh(0);
        } else if (card) {
          card.outerHTML = res.html;
          tick();
        }
      })
      .catch(function () { form.submit(); });
  });

  document.addEventListener("input", function (e) {
    var card = e.target.closest && e.target.closest("[data-card]");
    if (!card) return;
    card.setAttribute("data-dirty", "");
    var form = e.target.closest("form[data-attempt]");
    if (form) card.setAttribute("data-working-on", form.getAttribute("data-attempt"));
  });

  document.addEventListener("click", function (e) {
    var open = e.target.closest && e.target.closest("[data-open]");
    if (open && inbox() && !e.ctrlKey && !e.metaKey && !e.shiftKey) {
      e.preventDefault();
      var row = open.closest("[data-row]");
      if (row.classList.contains("open")) closeRow(row); else openRow(row);
      return;
    }
    if (!e.target.hasAttribute("data-dismiss")) return;
    var card = e.target.closest("[data-card]"), inRow = card && card.closest("[data-row]");
    if (inRow) { inRow.remove(); showEmpty(); updateRow(inRow.getAttribute("data-row")); return; }
    if (card) { card.remove(); scheduleRefresh(0); }
  });

  document.addEventListener("change", function (e) {
    if (e.target.hasAttribute && e.target.hasAttribute("data-select")) updateBulkBar();
  });

  // Keyboard shortcuts on the inbox: j / k move between rows, x selects, a approves, r opens
  // the rejection, ? shows the list. Never while typing, never with a modifier key.
  function currentRow() {
    return document.activeElement && document.activeElement.closest &&
      document.activeElement.closest("[data-row]");
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
    if (e.ctrlKey || e.metaKey || e.altKey || !inbox()) return;
    var t = e.target;
    if (t.closest && t.closest("input, textarea, select, [contenteditable], dialog")) return;
    var help = document.getElementById("shortcuts"), row = currentRow();
    if (e.key === "?") {
      if (help && !help.open) help.showModal(); else if (help) help.close();
    } else if (e.key === "j") moveTo(1);
    else if (e.key === "k") moveTo(-1);
    else if (e.key === "x" && row && row.querySelector("[data-select]")) {
      var box = row.querySelector("[data-select]");
      box.checked = !box.checked;
      updateBulkBar();
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
    tick();
    setInterval(tick, 1000);
    connect(0);
    updateBulkBar();
    // A safety net for lost events: re-check now and then (the inbox's list answers 304 when
    // nothing changed).
    if (document.querySelector("[data-live-src]")) setInterval(function () { scheduleRefresh(); }, 30000);
    if (inbox()) setInterval(refreshRows, 60000);
  });
})();
