// Kairox memory browser: renders the JSON API into the page. No framework, no build step.
// Memory bodies come from a model and may be hostile: text goes in with textContent only,
// and with its control and bidi characters shown as escapes (see visible()).
"use strict";

(() => {
  const csrfHeader = document.querySelector('meta[name="kairox-csrf-header"]').content;
  const csrfToken = document.querySelector('meta[name="kairox-csrf-token"]').content;
  const SCOPES = ["user", "workspace", "session"];
  const REFRESH_MS = 15000;

  // Only what the page is showing; it is re-read from the server on every load().
  // `current` holds the unfiltered user and workspace memories while a search narrows the
  // lists, so a proposal can still show which body it would replace.
  // `history` holds the earlier values of the memories whose history is open, by id.
  const state = { tab: "user", query: "", editing: null, approved: {}, current: {}, history: {}, busy: false };

  // -- the API -------------------------------------------------------------------------

  async function api(method, path, body) {
    const options = { method, headers: { Accept: "application/json" }, credentials: "same-origin" };
    if (method !== "GET") {
      // The server refuses changes without this header (a cross-site form cannot send it).
      options.headers[csrfHeader] = csrfToken;
      if (body !== undefined) {
        options.headers["Content-Type"] = "application/json";
        options.body = JSON.stringify(body);
      }
    }
    const response = await fetch(path, options);
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (!response.ok) {
      const message = (data && data.error) || `${response.status} ${response.statusText}`;
      throw new Error(message);
    }
    return data;
  }

  function listUrl(params) {
    const query = new URLSearchParams(params);
    if (state.query) query.set("q", state.query);
    return `/api/memories?${query}`;
  }

  // -- building blocks -----------------------------------------------------------------

  // The characters kairox.support.terminal.printable() escapes (but lone surrogates, which the store
  // refuses): on a page, C0/C1 controls draw as blank boxes, and a bidi override (U+202E)
  // shows a body in an order other than the one it is stored in.
  const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

  function visible(text) {
    return String(text).replace(UNSAFE, (c) => {
      const code = c.charCodeAt(0);
      return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
    });
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = visible(value);
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value);
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(visible(child)));
    }
    return node;
  }

  // `precise` adds the seconds: two values of a key are often minutes or less apart.
  function when(iso, precise) {
    if (!iso) return "";
    const date = new Date(iso);
    if (Number.isNaN(date.getTime())) return iso;
    return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: precise ? "medium" : "short" });
  }

  function notice(message, kind) {
    const box = document.getElementById("notice");
    box.textContent = message;
    box.className = `notice ${kind || "info"}`;
    box.hidden = false;
    clearTimeout(notice.timer);
    // Errors stay longer: they usually say what to fix. A click dismisses either.
    notice.timer = setTimeout(() => { box.hidden = true; }, kind === "error" ? 12000 : 4000);
  }

  function origin(record) {
    const p = record.provenance || {};
    if (p.written_by === "user") return "written by you";
    const parts = [];
    if (p.session_id) parts.push(`session ${p.session_id}`);
    if (p.turn_id) parts.push(`turn ${p.turn_id}`);
    return parts.length ? `proposed in ${parts.join(", ")}` : "proposed by the model";
  }

  function scopeBadge(scope) {
    return el("span", { class: `badge scope-${scope}`, text: scope });
  }

  function taintedBy(record) {
    return (record.tainted_by && record.tainted_by.length ? record.tainted_by : ["tool output"]).join(", ");
  }

  function injectionWarning(record) {
    return el(
      "div",
      { class: "warning", role: "alert" },
      el("strong", { text: "⚠ Possible prompt injection." }),
      ` This was proposed in a turn whose prompt held ${taintedBy(record)}. A web page, file, ` +
        "retrieved document or command result may have steered the model. Approve only if you asked for it."
    );
  }

  // -- pending proposals ---------------------------------------------------------------

  function pendingCard(record) {
    const current = (state.current[record.scope] || []).find((m) => m.key === record.key);
    const card = el(
      "article",
      { class: `card proposal${record.injection_warning ? " flagged" : ""}`, "data-id": record.id, "data-key": record.key || "" },
      record.injection_warning ? injectionWarning(record) : null,
      el("div", { class: "card-head" }, scopeBadge(record.scope), el("code", { class: "key", text: record.key || "(no key)" })),
      el("p", { class: "body", text: record.body }),
      current
        ? el("p", { class: "replaces" }, "Replaces: ", el("span", { text: current.body }))
        : null,
      el("p", { class: "meta", text: `${origin(record)} · ${when(record.created_at)}` }),
      el(
        "div",
        { class: "actions" },
        el("button", { type: "button", class: "primary", "data-action": "approve", text: "Approve", onclick: () => decide(record, "approve") }),
        el("button", { type: "button", class: "ghost", "data-action": "reject", text: "Reject", onclick: () => decide(record, "reject") })
      )
    );
    return card;
  }

  async function decide(record, verb) {
    try {
      await api("POST", `/api/memories/${record.id}/${verb}`, verb === "reject" ? {} : undefined);
      notice(`${verb === "approve" ? "Approved" : "Rejected"} ${record.scope} memory ${record.key}.`, "ok");
    } catch (error) {
      notice(error.message, "error");
    }
    await load();
  }

  // -- approved memories ---------------------------------------------------------------

  function memoryCard(record) {
    const editing = state.editing === record.id;
    const card = el("article", { class: "card", "data-id": record.id, "data-key": record.key || "" });
    card.append(
      el(
        "div",
        { class: "card-head" },
        record.key ? el("code", { class: "key", text: record.key }) : el("span", { class: "key none", text: "no key" }),
        record.injection_warning ? el("span", { class: "badge flag", title: `Proposed after ${taintedBy(record)}`, text: "⚠ after unvetted text" }) : null
      )
    );
    if (editing) {
      const area = el("textarea", { class: "edit-body", rows: 3, "aria-label": `New body for ${record.key || record.id}` });
      area.value = record.body;
      card.append(
        area,
        el(
          "div",
          { class: "actions" },
          el("button", { type: "button", class: "primary", "data-action": "save", text: "Save", onclick: () => save(record, area.value) }),
          el("button", { type: "button", class: "ghost", "data-action": "cancel", text: "Cancel", onclick: () => { state.editing = null; render(); } })
        )
      );
      setTimeout(() => area.focus(), 0);
    } else {
      card.append(
        el("p", { class: "body", text: record.body }),
        el("p", { class: "meta", text: `${origin(record)} · updated ${when(record.updated_at)}` }),
        el(
          "div",
          { class: "actions" },
          el("button", { type: "button", class: "ghost", "data-action": "edit", text: "Edit", onclick: () => { state.editing = record.id; render(); } }),
          record.earlier_values
            ? el("button", { type: "button", class: "ghost", "data-action": "history", "aria-expanded": String(record.id in state.history), text: `History (${record.earlier_values})`, onclick: () => toggleHistory(record) })
            : null,
          el("button", { type: "button", class: "danger", "data-action": "forget", text: "Forget", onclick: () => forget(record) })
        ),
        ...(record.id in state.history ? [historyList(state.history[record.id])] : [])
      );
    }
    return card;
  }

  // -- a key's earlier values ------------------------------------------------------------

  // Newest first: the current value (marked, valid since it was set), then the earlier ones.
  function historyList(records) {
    const values = records.filter((r) => r.status === "approved" || r.status === "superseded").reverse();
    return el(
      "ol",
      { class: "history", "aria-label": "Values of this key, newest first" },
      ...values.map((r) => {
        const current = r.status === "approved";
        return el(
          "li",
          { class: current ? "current" : "earlier", "data-id": r.id },
          el("p", { class: "body", text: r.body }),
          el(
            "p",
            { class: "meta" },
            current ? el("span", { class: "badge current", text: "current" }) : null,
            current ? " valid since " : "valid ",
            el("time", { class: "from", datetime: r.valid_from, text: when(r.valid_from, true) }),
            current ? null : " – ",
            current ? null : el("time", { class: "to", datetime: r.valid_to, text: when(r.valid_to, true) })
          )
        );
      })
    );
  }

  async function toggleHistory(record) {
    if (record.id in state.history) {
      delete state.history[record.id];
    } else {
      try {
        state.history[record.id] = (await api("GET", `/api/memories/${record.id}/history`)).history;
      } catch (error) {
        notice(error.message, "error");
      }
    }
    render();
  }

  async function save(record, body) {
    if (!body.trim()) {
      notice("The body is empty; use Forget to delete a memory.", "error");
      return;
    }
    try {
      await api("PUT", `/api/memories/${record.id}`, { body });
      state.editing = null;
      notice(`Saved ${record.key || `memory #${record.id}`}.`, "ok");
    } catch (error) {
      notice(error.message, "error");
    }
    await load();
  }

  async function forget(record) {
    const label = record.key || `#${record.id}`;
    if (!window.confirm(`Forget ${record.scope} memory ${label}?\n\n${visible(record.body)}\n\nThis cannot be undone.`)) return;
    try {
      await api("DELETE", `/api/memories/${record.id}`);
      notice(`Forgot ${label}.`, "ok");
    } catch (error) {
      notice(error.message, "error");
    }
    await load();
  }

  function empty(text) {
    return el("p", { class: "empty", text });
  }

  // -- rendering -----------------------------------------------------------------------

  let pending = [];

  function render() {
    const pendingList = document.getElementById("pending-list");
    pendingList.replaceChildren(...(pending.length ? pending.map(pendingCard) : [empty(state.query ? "No proposal matches the search." : "Nothing waits for your decision.")]));
    document.getElementById("pending-count").textContent = pending.length;
    document.getElementById("pending").classList.toggle("has-items", pending.length > 0);

    for (const scope of SCOPES) {
      const records = state.approved[scope] || [];
      document.querySelector(`[data-count="${scope}"]`).textContent = records.length;
      const list = document.querySelector(`[data-list="${scope}"]`);
      if (!records.length) {
        list.replaceChildren(empty(state.query ? "No memory matches the search." : "No memories yet."));
      } else if (scope === "session") {
        list.replaceChildren(...sessionGroups(records));
      } else {
        list.replaceChildren(...records.map(memoryCard));
      }
    }
  }

  function sessionGroups(records) {
    const groups = new Map();
    for (const record of records) {
      const id = record.session_id || "(unknown session)";
      if (!groups.has(id)) groups.set(id, []);
      groups.get(id).push(record);
    }
    // Newest session first: the one with the most recently updated memory.
    const ordered = [...groups.entries()].sort((a, b) => latest(b[1]).localeCompare(latest(a[1])));
    return ordered.map(([id, items]) =>
      el(
        "div",
        { class: "session-group" },
        el("h3", { class: "session-title" }, "Session ", el("code", { text: id }), el("span", { class: "count", text: items.length })),
        ...items.map(memoryCard)
      )
    );
  }

  function latest(records) {
    return records.map((r) => r.updated_at || "").sort().pop() || "";
  }

  function selectTab(tab) {
    state.tab = tab;
    for (const button of document.querySelectorAll('[role="tab"]')) {
      const selected = button.dataset.tab === tab;
      button.setAttribute("aria-selected", String(selected));
      button.tabIndex = selected ? 0 : -1;
      document.getElementById(button.getAttribute("aria-controls")).hidden = !selected;
    }
  }

  // -- loading -------------------------------------------------------------------------

  async function load() {
    if (state.busy) return;
    state.busy = true;
    try {
      const [waiting, ...lists] = await Promise.all([
        api("GET", listUrl({ status: "pending" })),
        ...SCOPES.map((scope) => api("GET", listUrl({ scope }))),
      ]);
      pending = waiting.memories;
      SCOPES.forEach((scope, i) => { state.approved[scope] = lists[i].memories; });
      // An open history is read again with the list: another process may have changed it.
      const open = Object.keys(state.history);
      const histories = await Promise.all(
        open.map((id) => api("GET", `/api/memories/${id}/history`).then((r) => r.history, () => null))
      );
      open.forEach((id, i) => { if (histories[i]) state.history[id] = histories[i]; else delete state.history[id]; });
      state.current = { user: state.approved.user, workspace: state.approved.workspace };
      if (state.query && pending.length) {
        const [user, workspace] = await Promise.all(
          ["user", "workspace"].map((scope) => api("GET", `/api/memories?scope=${scope}`))
        );
        state.current = { user: user.memories, workspace: workspace.memories };
      }
      render();
      document.body.dataset.loaded = "true";
    } catch (error) {
      notice(`Could not read the memories: ${error.message}`, "error");
    } finally {
      state.busy = false;
    }
  }

  function init() {
    for (const button of document.querySelectorAll('[role="tab"]')) {
      button.addEventListener("click", () => selectTab(button.dataset.tab));
    }
    let typing = null;
    document.getElementById("search").addEventListener("input", (event) => {
      clearTimeout(typing);
      typing = setTimeout(() => { state.query = event.target.value.trim(); load(); }, 200);
    });
    document.getElementById("refresh").addEventListener("click", () => load());
    document.getElementById("notice").addEventListener("click", (event) => { event.currentTarget.hidden = true; });
    document.getElementById("add-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const form = event.target;
      const data = Object.fromEntries(new FormData(form).entries());
      try {
        const { memory } = await api("POST", "/api/memories", data);
        form.reset();
        notice(`Saved ${memory.scope} memory ${memory.key}.`, "ok");
        selectTab(memory.scope);
      } catch (error) {
        notice(error.message, "error");
      }
      await load();
    });
    // Another process (the CLI, a chat) may change memories: re-read when the page comes
    // back into view, and now and then, but never while a body is being edited.
    document.addEventListener("visibilitychange", () => { if (!document.hidden && state.editing === null) load(); });
    setInterval(() => { if (!document.hidden && state.editing === null) load(); }, REFRESH_MS);
    selectTab("user");
    load();
  }

  init();
})();
