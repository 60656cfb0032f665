/* Airlock console: progressive enhancement, no build step.
 * - live: a WebSocket tells the page that something changed; the page refetches its fragments
 *   (elements with data-live-src) and, on a run's page, appends the run's new stream frames;
 *   the inbox (inbox.js, through the hooks below) moves only the changed row;
 * - forms marked data-fragment are sent with fetch and their card is updated in place;
 * - relative times and expiry countdowns tick.
 * Without JavaScript every form still works as a normal POST and a reload shows the news. */
(function () {
  "use strict";
  var FRAGMENT = { "X-Console-Fragment": "1" };
  document.documentElement.classList.add("js");  // the phone's menu needs this script
  var refreshTimer = null;
  // What a page's own script (inbox.js) handles in place of the generic refresh; each hook
  // returns true when it did.
  var hooks = {};

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
    syncPresence();
    showPresence();
    document.querySelectorAll("time[data-relative]").forEach(function (el) {
      el.textContent = relative(new Date(el.getAttribute("datetime")));
    });
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var left = new Date(el.getAttribute("data-countdown")).getTime() - Date.now();
      if (left <= 0) {
        if (!el.classList.contains("gone")) {
          el.classList.add("gone");
          if (!hooks.expired || !hooks.expired(el)) scheduleRefresh(1500);
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
      // Every place that shows the count: the nav and the inbox's tab agree.
      var kv = pair.split("=");
      document.querySelectorAll('[data-count="' + kv[0] + '"]').forEach(function (el) {
        el.textContent = kv[1];
        el.classList.toggle(kv[0] === "in_doubt" ? "warn" : "hot", kv[1] !== "0");
      });
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
    var all = Array.prototype.slice.call(document.querySelectorAll("[data-card]:not([data-keep]):not([data-held])"));
    var i = all.indexOf(card);
    return all[i + 1] || all[i - 1] || null;
  }

  // Keyboard focus must not fall to <body> when the focused card leaves the page.
  // After a decision, focus goes to the next card itself, never to one of its buttons: Enter
  // pressed twice must not decide a second call.
  function focusAfterDecision(next, area) {
    var target = next;
    if (target && !target.hasAttribute("tabindex")) target.setAttribute("tabindex", "-1");
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
      // Bidi controls shown as the server shows them (console/bidi.py): [U+202E].
      data.textContent = JSON.stringify(f.data, null, 1).replace(/\n\s*/g, " ").replace(
        /[\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
        function (c) { return "[U+" + c.charCodeAt(0).toString(16).toUpperCase() + "]"; }
      );
      li.append(kind, " ", data);
      list.append(li);
      last = f.seq;
    });
    list.setAttribute("data-last-seq", String(last));
    list.scrollTop = list.scrollHeight;
    var empty = document.querySelector("[data-frames-empty]");
    if (empty) empty.remove();
  }

  // --- presence: the page says over its socket which cards it has open (again every third of
  // data-presence-seconds); the server tells it who else has them open, and each name is shown
  // until that person's page closes the card or goes quiet for data-presence-seconds. ---------

  var socket = null, announced = {}, lastAnnounce = 0, viewers = {};

  function openCards() {
    var ids = {};
    document.querySelectorAll("[data-slot] > [data-card], [data-viewing] > [data-card]").forEach(function (card) {
      if (!card.hasAttribute("data-keep") && !card.closest("[data-held]")) ids[card.getAttribute("data-card")] = true;
    });
    return ids;
  }

  function say(type, id) {
    socket.send(JSON.stringify({ type: type, call_id: id }));
  }

  function syncPresence() {
    var seconds = Number(document.body.getAttribute("data-presence-seconds") || 0);
    if (!seconds || !socket || socket.readyState !== WebSocket.OPEN) return;
    var open = openCards(), again = Date.now() - lastAnnounce > seconds * 1000 / 3;
    Object.keys(announced).forEach(function (id) {
      if (!open[id]) { say("left", id); delete announced[id]; delete viewers[id]; }
    });
    Object.keys(open).forEach(function (id) {
      if (!announced[id] || again) { say("viewing", id); announced[id] = true; }
    });
    if (again) lastAnnounce = Date.now();
  }

  function heard(msg) {
    var seen = viewers[msg.call_id] = viewers[msg.call_id] || {};
    if (msg.viewing) seen[msg.who] = Date.now() + msg.seconds * 1000;
    else delete seen[msg.who];
    showPresence();
  }

  function listed(names) {
    if (names.length < 2) return names.join("");
    return names.slice(0, -1).join(", ") + " and " + names[names.length - 1];
  }

  function showPresence() {
    var now = Date.now();
    document.querySelectorAll("[data-card]").forEach(function (card) {
      var seen = viewers[card.getAttribute("data-card")] || {};
      var names = Object.keys(seen).filter(function (who) { return seen[who] > now; }).sort();
      var shown = card.querySelector("[data-presence]");
      if (!names.length) { if (shown) shown.remove(); return; }
      var text = listed(names) + (names.length > 1 ? " are viewing" : " is viewing");
      if (!shown) {
        shown = document.createElement("span");
        shown.className = "badge presence"; shown.setAttribute("data-presence", "");
        shown.title = "Has this card open now";
        var head = card.querySelector(".card-head");
        (head || card).append(shown);
      }
      if (shown.textContent !== text) shown.textContent = text;
    });
  }

  function connect(attempt) {
    if (!document.body.hasAttribute("data-live")) return;
    var status = document.querySelector("[data-live-status]");
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    if (status) status.hidden = false;
    socket = new WebSocket(scheme + location.host + document.body.getAttribute("data-ws"));
    socket.onopen = function () {
      attempt = 0;
      announced = {}; lastAnnounce = 0;  // a new connection knows nothing of this page's cards
      syncPresence();
      if (status) { status.textContent = "live"; status.classList.add("on"); }
      if (document.body.hasAttribute("data-connected-once")) {  // missed news
        if (!hooks.reconnected || !hooks.reconnected()) scheduleRefresh();
      }
      document.body.setAttribute("data-connected-once", "");
      document.body.setAttribute("data-socket", "open");
    };
    socket.onmessage = function (e) {
      var msg = JSON.parse(e.data);
      if (msg.type === "presence") { heard(msg); return; }
      if (msg.type === "frames") appendFrames(msg.frames);
      if (!hooks.event || !hooks.event(msg)) scheduleRefresh();
    };
    socket.onclose = function () {
      document.body.setAttribute("data-socket", "closed");
      viewers = {};  // nobody's word reaches this page now
      if (status) { status.textContent = "reconnecting…"; status.classList.remove("on"); }
      setTimeout(function () { connect(attempt + 1); }, Math.min(15000, 500 * Math.pow(2, attempt)));
    };
  }

  // --- the undo window: a decision waits data-undo seconds (AIRLOCK_CONSOLE["UNDO_SECONDS"])
  // before it is sent, its card set aside and a notice naming it offering Undo; leaving the
  // page sends what waits at once (keepalive), so a decision is never silently dropped. -------

  var held = [];

  function noticeText(card, verb) {
    var tool = card.querySelector(".card-head h3 code"), said = card.querySelector("[data-summary]");
    return verb + " " + (tool ? tool.textContent : "this call") +
      (said ? " — " + said.textContent : "") + ".";
  }

  function hold(form, card, seconds) {
    var box = (hooks.holder && hooks.holder(card)) || card;
    var notice = document.createElement("div");
    notice.className = "flash warn"; notice.setAttribute("role", "status");
    notice.setAttribute("data-pending", card.getAttribute("data-card"));
    var text = document.createElement("span");
    text.textContent = noticeText(card, form.getAttribute("data-decision")) + " ";
    var left = document.createElement("span");
    left.setAttribute("data-undo-left", "");
    var undo = document.createElement("button");
    undo.type = "button"; undo.className = "link"; undo.textContent = "Undo";
    notice.append(text, undo, left);
    var entry = { form: form, card: card, box: box, notice: notice, due: Date.now() + seconds * 1000 };
    var next = neighbour(card);
    held.push(entry);
    box.hidden = true; box.setAttribute("data-held", "");
    var area = document.getElementById("flash-area") || card.parentNode;
    area.prepend(notice);
    if (hooks.setAside) hooks.setAside(box); else focusAfterDecision(next, area);
    function countdown() {
      var s = Math.ceil((entry.due - Date.now()) / 1000);
      left.textContent = " (sent in " + Math.max(s, 0) + " s)";
    }
    countdown();
    entry.ticker = setInterval(countdown, 250);
    entry.timer = setTimeout(function () { release(entry); send(entry.form, entry.card, notice); }, seconds * 1000);
    undo.addEventListener("click", function () {
      release(entry);
      notice.remove();
      box.hidden = false; box.removeAttribute("data-held");
      card.removeAttribute("data-submitting");
      form.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
      var back = box.querySelector("[data-open]") || card;
      if (!back.hasAttribute("tabindex") && back === card) card.setAttribute("tabindex", "-1");
      back.focus();
    });
  }

  function release(entry) {
    clearTimeout(entry.timer); clearInterval(entry.ticker);
    held = held.filter(function (e) { return e !== entry; });
  }

  window.addEventListener("pagehide", function () {
    held.slice().forEach(function (entry) {
      release(entry);
      fetch(entry.form.action, {
        method: "POST", body: new FormData(entry.form), headers: FRAGMENT,
        credentials: "same-origin", keepalive: true
      });
    });
  });

  // Flash messages do not pile up: the newest few stay.
  function trimFlashes(area) {
    var all = area ? area.querySelectorAll(".flash:not([data-pending])") : [];
    for (var i = 3; i < all.length; i++) all[i].remove();
  }

  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!form.hasAttribute("data-fragment")) return;
    e.preventDefault();
    var card = form.closest("[data-card]");
    if (card) card.setAttribute("data-submitting", "");
    form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    var seconds = Number(document.body.getAttribute("data-undo") || 0);
    if (card && seconds > 0 && form.hasAttribute("data-decision")) hold(form, card, seconds);
    else send(form, card, null);
  });

  // Post a card's form; ``pending`` is its undo notice, replaced by the answer.
  function send(form, card, pending) {
    fetch(form.action, { method: "POST", body: new FormData(form), headers: FRAGMENT, credentials: "same-origin" })
      .then(function (r) {
        // A card in answer (an edit to confirm, a refusal) replaces the card; else it decided.
        var isCard = !r.ok || r.headers.get("X-Console-Card") === "1";
        return r.text().then(function (html) { return { isCard: isCard, html: html }; });
      })
      .then(function (res) {
        var area = document.getElementById("flash-area");
        if (pending) pending.remove();
        if (!res.isCard) {
          if (area) { area.insertAdjacentHTML("afterbegin", res.html); trimFlashes(area); }
          if (pending) { if (hooks.sent) hooks.sent(card); else card.remove(); return; }
          if (hooks.decided && hooks.decided(card, form, area)) return;
          var next = card && neighbour(card);
          if (card) card.remove();
          focusAfterDecision(next, area);
          scheduleRefresh(0);
        } else if (card) {
          if (pending) {  // refused after the window: the card comes back with the reason
            var box = card.closest("[data-held]");
            if (box) { box.hidden = false; box.removeAttribute("data-held"); }
          }
          var slot = card.parentNode, id = card.getAttribute("data-card");
          card.outerHTML = res.html;
          tick();
          var fresh = slot && slot.querySelector('[data-card="' + id + '"]');
          var confirm = fresh && fresh.querySelector("[data-edit-preview] button");
          if (confirm) confirm.focus();
        }
      })
      .catch(function () { form.submit(); });
  }

  document.addEventListener("input", function (e) {
    var card = e.target.closest && e.target.closest("[data-card]");
    if (!card) return;
    card.setAttribute("data-dirty", "");
    var form = e.target.closest("form[data-attempt]");
    if (form) card.setAttribute("data-working-on", form.getAttribute("data-attempt"));
  });

  document.addEventListener("click", function (e) {
    var menu = e.target.closest && e.target.closest("[data-menu]");
    if (menu) {
      var open = menu.closest(".top").classList.toggle("menu-open");
      menu.setAttribute("aria-expanded", open ? "true" : "false");
      return;
    }
    if (!e.target.hasAttribute("data-dismiss")) return;
    var card = e.target.closest("[data-card]");
    if (card && hooks.dismissed && hooks.dismissed(card)) return;
    if (card) { card.remove(); scheduleRefresh(0); }
  });

  window.AirlockConsole = {
    FRAGMENT: FRAGMENT, hooks: hooks, tick: tick, updateCounts: updateCounts,
    keepAsNotice: keepAsNotice, focusAfterDecision: focusAfterDecision
  };

  document.addEventListener("DOMContentLoaded", function () {
    tick();
    setInterval(tick, 1000);
    connect(0);
    // A safety net for lost events: re-check now and then.
    if (document.querySelector("[data-live-src]")) setInterval(function () { scheduleRefresh(); }, 30000);
  });
})();
