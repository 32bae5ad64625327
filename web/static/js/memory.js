// The memory view: search and filter notes, open one, edit it, deprecate or delete it, mark
// an older note as replaced by it, see its history (every change, who made it) and restore a
// version, bring a deleted note back, and confirm or reject the entities waiting in the
// pending list; choose between a new note and the older one it contradicts (keep new / keep
// old / keep both). Results are shown in the order the server gives (current notes first):
// the page never re-sorts them.

import { json } from "./api.js";
import { $, clear, h, timeAgo } from "./dom.js";

const PIN_TAG = "pinned"; // memory/loop/recall.py PIN_TAG

const FALLBACK_TYPES = [
  "identity", "preference", "decision", "architecture", "project",
  "research", "code", "bug", "conversation", "general",
];

let ui = null;
let confirmAction = async () => true;
let openId = null;
let loaded = false;
let shownVersion = null; // the version whose text is shown under the history
let candidates = null; // the notes "Replaces…" offers, loaded when it opens

export function initMemory({ confirm }) {
  confirmAction = confirm;
  ui = {
    search: $("#mem-search"),
    query: $("#mem-query"),
    type: $("#mem-type"),
    scope: $("#mem-scope"),
    scopes: $("#mem-scopes"),
    tag: $("#mem-tag"),
    status: $("#mem-status"),
    count: $("#mem-count"),
    list: $("#mem-list"),
    pending: $("#pending-list"),
    detail: $("#mem-detail"),
    form: $("#mem-form"),
    title: $("#mem-title"),
    summary: $("#mem-summary"),
    tags: $("#mem-tags"),
    body: $("#mem-body"),
    meta: $("#mem-meta"),
    saved: $("#mem-saved"),
    deprecate: $("#mem-deprecate"),
    pin: $("#mem-pin"),
    remove: $("#mem-delete"),
    back: $("#mem-back"),
    layout: $(".mem-layout"),
    history: $("#mem-history-list"),
    version: $("#mem-version"),
    versionHead: $("#mem-version-head"),
    versionText: $("#mem-version-text"),
    restore: $("#mem-restore"),
    restored: $("#mem-restored"),
    deleted: $("#deleted-list"),
    conflicts: $("#conflict-list"),
    replacesOpen: $("#mem-replaces-open"),
    replaces: $("#mem-replaces"),
    replacesQuery: $("#mem-replaces-query"),
    replacesList: $("#mem-replaces-list"),
    replacesCancel: $("#mem-replaces-cancel"),
    replacesStatus: $("#mem-replaces-status"),
  };
  ui.search.addEventListener("submit", (event) => {
    event.preventDefault();
    runSearch();
  });
  for (const select of [ui.type, ui.status]) select.addEventListener("change", runSearch);
  ui.form.addEventListener("submit", (event) => {
    event.preventDefault();
    save();
  });
  ui.deprecate.addEventListener("click", toggleDeprecated);
  ui.pin.addEventListener("click", togglePinned);
  ui.remove.addEventListener("click", removeNote);
  ui.back.addEventListener("click", closeDetail);
  ui.restore.addEventListener("click", restoreShown);
  ui.replacesOpen.addEventListener("click", () => (ui.replaces.hidden ? openReplaces() : closeReplaces()));
  ui.replacesCancel.addEventListener("click", closeReplaces);
  ui.replacesQuery.addEventListener("input", renderCandidates);
  ui.replacesQuery.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeReplaces();
  });
}

/** Called when the view is shown: load filters, results and pending entities once. */
export async function showMemory() {
  if (loaded) return;
  loaded = true;
  await Promise.all([loadFilters(), runSearch(), loadPending(), loadDeleted(), loadConflicts()]);
}

async function loadFilters() {
  let types = FALLBACK_TYPES;
  let scopes = [];
  let whose = {};
  try {
    const stats = await json("/api/memories/stats");
    types = Object.keys(stats.by_type || {}).length ? Object.keys(stats.by_type) : types;
    scopes = Object.keys(stats.by_scope || {});
    whose = stats.whose || {};
  } catch {
    // the filters still work with the known types
  }
  for (const t of types) ui.type.append(h("option", { value: t }, t));
  clear(ui.scopes);
  // a member's or a group's scope is offered by name: filter by person or by group
  for (const s of scopes) ui.scopes.append(h("option", { value: s, label: whoseLabel(whose[s], s) }));
}

/** Whose a note is, in a few words: a Feishu member's name, a group's team, else its scope. */
function whoseLabel(whose, scope) {
  if (whose?.kind === "person") return `${whose.name}'s own`;
  if (whose?.kind === "team") return `team of ${whose.name}`;
  return scope;
}

function filters() {
  return {
    type: ui.type.value || null,
    scope: ui.scope.value.trim() || null,
    tag: ui.tag.value.trim() || null,
    status: ui.status.value || null,
  };
}

export async function runSearch() {
  const query = ui.query.value.trim();
  const f = filters();
  let items;
  try {
    if (query) {
      const data = await json("/api/memories/search", {
        method: "POST",
        body: {
          query,
          limit: 50,
          type: f.type,
          scope: f.scope,
          tag: f.tag,
          include_inactive: f.status !== "active",
        },
      });
      items = data.results.filter((r) => !f.status || r.status === f.status);
    } else {
      const params = new URLSearchParams({ limit: "200" });
      for (const [key, value] of Object.entries(f)) if (value) params.set(key, value);
      items = (await json(`/api/memories?${params}`)).items;
    }
  } catch (err) {
    ui.count.textContent = "";
    clear(ui.list).append(h("li", { class: "error-text" }, `Search failed: ${err.message}`));
    return;
  }
  ui.count.textContent = `${items.length} note${items.length === 1 ? "" : "s"}${query ? ` for “${query}”` : ""}`;
  clear(ui.list);
  if (!items.length) ui.list.append(h("li", { class: "meta empty" }, "Nothing found."));
  // in the server's order (current notes first, replaced ones after): never re-sorted here
  for (const note of items) {
    ui.list.append(
      h(
        "li",
        { dataset: { id: note.id, status: note.status } },
        h(
          "button",
          {
            type: "button",
            class: "mem-item",
            "aria-current": note.id === openId ? "true" : null,
            onclick: () => openNote(note.id),
          },
          h(
            "span",
            { class: "mem-item-head" },
            h("span", { class: "mem-item-title" }, note.title),
            h("span", { class: "badge" }, note.type),
            note.status !== "active" ? h("span", { class: `badge badge-${note.status}` }, note.status) : null,
            (note.tags || []).includes(PIN_TAG) ? h("span", { class: "badge badge-pinned" }, "pinned") : null,
          ),
          note.summary ? h("span", { class: "mem-item-summary" }, note.summary) : null,
          h(
            "span",
            { class: "meta" },
            [
              whoseLabel(note.whose, note.scope),
              ...(note.tags || []).map((t) => `#${t}`),
              timeAgo(note.updated),
              // search hits only: how strongly this note matches, the same scale for any query
              ...(typeof note.relevance === "number" ? [`relevance ${note.relevance.toFixed(2)}`] : []),
            ].join(" · "),
          ),
        ),
        replacedMarker(note),
      ),
    );
  }
}

/** A link that opens the note `id` (its title, else its id). */
function noteLink(id, title) {
  return h(
    "a",
    {
      href: "#memory",
      class: "note-link",
      dataset: { id },
      onclick: (event) => {
        event.preventDefault();
        openNote(id);
      },
    },
    title || id,
  );
}

/** Under a superseded note: "Replaced by <the newer note> · <date>" (outside the item's
 * button: a link cannot sit inside a button). The date is the note's last change, when it
 * was replaced unless edited since. */
function replacedMarker(note) {
  if (note.status !== "superseded") return null;
  const when = new Date(note.updated);
  return h(
    "p",
    { class: "mem-replaced meta" },
    "Replaced by ",
    note.superseded_by ? noteLink(note.superseded_by, note.superseded_by_title) : "a newer note",
    " · ",
    h("time", { datetime: note.updated, title: when.toLocaleString() }, when.toLocaleDateString()),
  );
}

export async function openNote(id) {
  let note;
  try {
    note = await json(`/api/memories/${encodeURIComponent(id)}`);
  } catch (err) {
    ui.saved.textContent = "";
    ui.detail.hidden = false;
    ui.meta.replaceChildren(h("dd", { class: "error-text" }, `Could not open the note: ${err.message}`));
    return;
  }
  openId = note.id;
  fillForm(note);
  hideVersion();
  closeReplaces();
  // after the note: reading it is what notices (and records) an edit of its file by hand
  await loadHistory();
  ui.detail.hidden = false;
  ui.layout.classList.add("detail-open");
  for (const button of ui.list.querySelectorAll(".mem-item")) {
    const li = button.closest("li");
    if (li.dataset.id === openId) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
}

function fillForm(note) {
  ui.title.value = note.title;
  ui.summary.value = note.summary || "";
  ui.tags.value = (note.tags || []).join(", ");
  ui.body.value = note.body;
  ui.deprecate.textContent = note.status === "active" ? "Deprecate" : "Reactivate";
  ui.deprecate.title = note.status === "superseded" ? "Make it current again (no longer replaced)" : "";
  ui.deprecate.dataset.status = note.status;
  const pinned = (note.tags || []).includes(PIN_TAG);
  ui.pin.textContent = pinned ? "Unpin" : "Pin";
  ui.pin.setAttribute("aria-pressed", String(pinned));
  ui.saved.textContent = "";
  const rows = [
    ["Id", note.id],
    ["Type", note.type],
    ["Scope", note.scope],
    ["Whose", note.whose?.kind === "owner" ? "the owner's" : whoseLabel(note.whose, note.scope)],
    ["Status", note.status],
    ...(note.status === "superseded" && note.superseded_by
      ? [["Replaced by", noteLink(note.superseded_by, note.superseded_by_title)]]
      : []),
    ["Importance", String(note.importance)],
    ["Updated", new Date(note.updated).toLocaleString()],
    ["File", note.path],
  ];
  ui.meta.replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  ui.form.dataset.original = JSON.stringify(formValues(note));
}

function formValues(note) {
  return note
    ? { title: note.title, summary: note.summary || "", tags: note.tags || [], content: note.body }
    : {
        title: ui.title.value.trim(),
        summary: ui.summary.value.trim(),
        tags: ui.tags.value
          .split(/[,，]/)
          .map((t) => t.trim())
          .filter(Boolean),
        content: ui.body.value,
      };
}

async function save() {
  if (!openId) return;
  const original = JSON.parse(ui.form.dataset.original || "{}");
  const current = formValues(null);
  const changes = {};
  for (const [key, value] of Object.entries(current)) {
    if (JSON.stringify(value) !== JSON.stringify(original[key])) changes[key] = value;
  }
  if (!Object.keys(changes).length) {
    ui.saved.textContent = "No changes.";
    return;
  }
  if ("content" in changes && !changes.content.trim()) {
    ui.saved.textContent = "The body cannot be empty.";
    return;
  }
  await update(changes, "Saved.");
}

async function update(changes, message) {
  try {
    const note = await json(`/api/memories/${encodeURIComponent(openId)}`, { method: "PUT", body: changes });
    fillForm(note);
    ui.saved.textContent = message;
    await Promise.all([runSearch(), loadHistory()]);
  } catch (err) {
    ui.saved.textContent = `Not saved: ${err.message}`;
  }
}

async function toggleDeprecated() {
  if (!openId) return;
  const status = ui.deprecate.dataset.status;
  if (status === "active") await update({ status: "deprecated" }, "Deprecated.");
  // a replaced note made current again no longer names the note that replaced it
  else if (status === "superseded") await update({ status: "active", superseded_by: null }, "Reactivated.");
  else await update({ status: "active" }, "Reactivated.");
}

/** Pinning is the tag "pinned": the memory loop starts every session with pinned notes. */
async function togglePinned() {
  if (!openId) return;
  const tags = JSON.parse(ui.form.dataset.original || "{}").tags || [];
  const pinned = tags.includes(PIN_TAG);
  const next = pinned ? tags.filter((t) => t !== PIN_TAG) : [...tags, PIN_TAG];
  await update({ tags: next }, pinned ? "Unpinned." : "Pinned: every session starts with it.");
}

async function removeNote() {
  if (!openId) return;
  const ok = await confirmAction(`Delete the note “${ui.title.value}”? Its file is removed.`);
  if (!ok) return;
  try {
    await json(`/api/memories/${encodeURIComponent(openId)}`, { method: "DELETE" });
  } catch (err) {
    ui.saved.textContent = `Not deleted: ${err.message}`;
    return;
  }
  closeDetail();
  await Promise.all([runSearch(), loadDeleted()]);
}

function closeDetail() {
  closeReplaces();
  openId = null;
  ui.detail.hidden = true;
  ui.layout.classList.remove("detail-open");
}

// --- "Replaces…": the open note replaces an older one, which is marked superseded by it -------

const ID_LIKE = /^mem_[A-Za-z0-9_.-]+$/;
const CANDIDATES_SHOWN = 20;
let lookUpTimer = null;

async function openReplaces() {
  if (!openId) return;
  const id = openId;
  ui.replaces.hidden = false;
  ui.replacesOpen.setAttribute("aria-expanded", "true");
  ui.replacesQuery.value = "";
  ui.replacesStatus.textContent = "";
  candidates = null;
  clear(ui.replacesList).append(h("li", { class: "meta empty" }, "Loading…"));
  let data;
  try {
    // every status, current notes first (the list route's order)
    data = await json("/api/memories?limit=500");
  } catch (err) {
    clear(ui.replacesList).append(h("li", { class: "error-text" }, `Could not load the notes: ${err.message}`));
    return;
  }
  if (id !== openId || ui.replaces.hidden) return;
  candidates = data;
  renderCandidates();
  ui.replacesQuery.focus();
}

function closeReplaces() {
  clearTimeout(lookUpTimer);
  candidates = null;
  ui.replaces.hidden = true;
  ui.replacesOpen.setAttribute("aria-expanded", "false");
  clear(ui.replacesList);
}

/** The notes whose title (or id) holds what is typed; never the open note itself, nor
 * one it already replaces. */
function renderCandidates() {
  if (!candidates) return;
  const query = ui.replacesQuery.value.trim();
  const wanted = query.toLowerCase();
  const found = candidates.items.filter(
    (n) =>
      n.id !== openId &&
      n.superseded_by !== openId &&
      (!wanted || n.title.toLowerCase().includes(wanted) || n.id.toLowerCase().includes(wanted)),
  );
  clear(ui.replacesList);
  for (const note of found.slice(0, CANDIDATES_SHOWN)) ui.replacesList.append(candidateItem(note));
  if (found.length > CANDIDATES_SHOWN) {
    ui.replacesList.append(h("li", { class: "meta" }, `${found.length - CANDIDATES_SHOWN} more: type more of the title.`));
  }
  const partial = candidates.total > candidates.items.length;
  clearTimeout(lookUpTimer);
  if (!found.length && ID_LIKE.test(query) && query !== openId) {
    // an id beyond the notes listed here: asked once the typing pauses
    ui.replacesList.append(h("li", { class: "meta empty" }, "Looking up this id…"));
    lookUpTimer = setTimeout(() => lookUpCandidate(query), 300);
  } else if (!found.length) {
    ui.replacesList.append(h("li", { class: "meta empty" }, query === openId ? "A note cannot replace itself." : "No note matches."));
  }
  ui.replacesStatus.textContent = partial
    ? `Among the first ${candidates.items.length} of ${candidates.total} notes; type an id for any other.`
    : "";
}

async function lookUpCandidate(id) {
  let note;
  try {
    note = await json(`/api/memories/${encodeURIComponent(id)}`);
  } catch {
    note = null;
  }
  if (ui.replacesQuery.value.trim() !== id || !candidates) return; // typed on meanwhile
  clear(ui.replacesList).append(note ? candidateItem(note) : h("li", { class: "meta empty" }, "No note has this id."));
}

function candidateItem(note) {
  return h(
    "li",
    { dataset: { id: note.id } },
    h(
      "button",
      { type: "button", class: "mem-item", onclick: () => markReplaced(note) },
      h(
        "span",
        { class: "mem-item-head" },
        h("span", { class: "mem-item-title" }, note.title),
        h("span", { class: "badge" }, note.type),
        note.status !== "active" ? h("span", { class: `badge badge-${note.status}` }, note.status) : null,
      ),
      h("span", { class: "meta" }, `${note.id} · ${timeAgo(note.updated)}`),
    ),
  );
}

/** The older note becomes superseded by the open one (PUT on the older note: the store checks
 * that the newer one exists and is not the same note, and its history records the change). */
async function markReplaced(older) {
  if (!openId) return;
  const newer = openId;
  try {
    await json(`/api/memories/${encodeURIComponent(older.id)}`, {
      method: "PUT",
      body: { status: "superseded", superseded_by: newer },
    });
  } catch (err) {
    ui.replacesStatus.textContent = `Not replaced: ${err.message}`;
    return;
  }
  closeReplaces();
  ui.saved.textContent = `“${older.title}” is now marked as replaced by this note.`;
  await runSearch();
}

export async function loadPending() {
  let items;
  try {
    items = (await json("/api/memories/pending")).pending;
  } catch (err) {
    clear(ui.pending).append(h("li", { class: "error-text" }, `Could not load: ${err.message}`));
    return;
  }
  clear(ui.pending);
  if (!items.length) ui.pending.append(h("li", { class: "meta empty" }, "Nothing waiting."));
  for (const item of items) {
    const act = async (verb) => {
      try {
        await json(`/api/memories/pending/${encodeURIComponent(item.id)}/${verb}`, { method: "POST" });
      } catch (err) {
        li.append(h("span", { class: "error-text" }, ` ${err.message}`));
        return;
      }
      await Promise.all([loadPending(), runSearch()]);
    };
    const li = h(
      "li",
      { class: "pending-item", dataset: { id: item.id } },
      h(
        "div",
        { class: "mem-item-head" },
        h("span", { class: "mem-item-title" }, item.title),
        h("span", { class: "badge" }, item.why ? `agent: ${item.action}` : item.type),
        !item.why && item.confidence !== undefined && item.confidence !== null
          ? h("span", { class: "meta" }, `confidence ${Math.round(item.confidence * 100)}%`)
          : null,
      ),
      h("p", { class: "pending-content" }, item.content),
      // a model's change that waits for the person (docs/permissions.md, "Memory")
      item.why ? h("p", { class: "meta" }, `Waits for you: it ${item.why}.`) : null,
      h(
        "div",
        { class: "form-actions" },
        h("button", { type: "button", class: "primary", onclick: () => act("confirm") }, "Confirm"),
        h("button", { type: "button", onclick: () => act("reject") }, "Reject"),
      ),
    );
    ui.pending.append(li);
  }
}

// --- conflicts: a new note contradicting an older one, side by side, the user's choice -------

const KEEP_LABELS = { new: "Keep new", old: "Keep old", both: "Keep both" };

function conflictSide(label, note, id) {
  if (!note) {
    return h("div", { class: "conflict-side" }, h("p", { class: "meta" }, `${label} [${id}]: deleted`));
  }
  return h(
    "div",
    { class: "conflict-side", dataset: { side: label, id: note.id } },
    h(
      "div",
      { class: "mem-item-head" },
      h("span", { class: "badge" }, label),
      h("span", { class: "mem-item-title" }, note.title),
      h("span", { class: "meta" }, `${note.status} · ${timeAgo(note.created)}`),
    ),
    h("p", { class: "pending-content" }, note.body),
  );
}

export async function loadConflicts() {
  let items;
  try {
    items = (await json("/api/memories/supersessions")).supersessions;
  } catch (err) {
    clear(ui.conflicts).append(h("li", { class: "error-text" }, `Could not load: ${err.message}`));
    return;
  }
  clear(ui.conflicts);
  if (!items.length) ui.conflicts.append(h("li", { class: "meta empty" }, "No conflicts."));
  for (const item of items) {
    const choose = async (keep) => {
      try {
        await json(`/api/memories/supersessions/${encodeURIComponent(item.id)}/resolve`, {
          method: "POST",
          body: { keep },
        });
      } catch (err) {
        li.append(h("span", { class: "error-text" }, ` ${err.message}`));
        return;
      }
      await Promise.all([loadConflicts(), runSearch()]);
    };
    const li = h(
      "li",
      { class: "pending-item conflict-item", dataset: { id: item.id } },
      h("p", { class: "meta" }, item.reason),
      h(
        "div",
        { class: "conflict-sides" },
        conflictSide("new", item.new, item.new_id),
        conflictSide("old", item.old, item.old_id),
      ),
      h(
        "div",
        { class: "form-actions" },
        ["new", "old", "both"].map((keep) =>
          h(
            "button",
            { type: "button", class: keep === "new" ? "primary" : null, onclick: () => choose(keep) },
            KEEP_LABELS[keep],
          ),
        ),
      ),
    );
    ui.conflicts.append(li);
  }
}

// --- history: every change of the open note, and restoring one ------------------------------

const KIND_LABELS = {
  create: "created",
  edit: "edited",
  supersede: "superseded",
  deprecate: "deprecated",
  delete: "deleted",
  restore: "restored",
  baseline: "as first seen",
};

function versionLabel(v) {
  const kind = KIND_LABELS[v.kind] || v.kind;
  const from = v.kind === "restore" && v.restored_from ? ` v${v.restored_from}` : "";
  return `v${v.version} · ${kind}${from} · ${v.source_label}`;
}

async function loadHistory() {
  if (!openId) return;
  const id = openId;
  let data;
  try {
    data = await json(`/api/memories/${encodeURIComponent(id)}/history`);
  } catch (err) {
    clear(ui.history).append(h("li", { class: "error-text" }, `Could not load the history: ${err.message}`));
    return;
  }
  if (id !== openId) return; // another note was opened meanwhile
  clear(ui.history);
  if (!data.versions.length) {
    ui.history.append(h("li", { class: "meta empty" }, "No changes recorded yet (saved before history was kept)."));
  }
  for (const v of data.versions) {
    ui.history.append(
      h(
        "li",
        { dataset: { version: String(v.version), kind: v.kind, door: v.source.door } },
        h(
          "button",
          {
            type: "button",
            class: "history-item",
            "aria-current": shownVersion === v.version ? "true" : null,
            onclick: () => showVersion(id, v.version),
          },
          h("span", { class: "history-label" }, versionLabel(v)),
          h("span", { class: "meta", title: new Date(v.at).toLocaleString() }, timeAgo(v.at)),
        ),
      ),
    );
  }
}

async function showVersion(id, number) {
  let v;
  try {
    v = await json(`/api/memories/${encodeURIComponent(id)}/history/${number}`);
  } catch (err) {
    ui.restored.textContent = `Could not open v${number}: ${err.message}`;
    return;
  }
  shownVersion = number;
  ui.versionHead.textContent = `${versionLabel(v)} · ${new Date(v.at).toLocaleString()}`;
  ui.versionText.textContent = v.text;
  ui.restored.textContent = "";
  ui.version.hidden = false;
  for (const button of ui.history.querySelectorAll(".history-item")) {
    if (button.closest("li").dataset.version === String(number)) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
}

function hideVersion() {
  shownVersion = null;
  ui.version.hidden = true;
  ui.restored.textContent = "";
}

/** A restore is itself a version: it can be undone by restoring the one before, so no confirm. */
async function restoreShown() {
  if (!openId || shownVersion === null) return;
  const number = shownVersion;
  try {
    const data = await json(`/api/memories/${encodeURIComponent(openId)}/history/${number}/restore`, {
      method: "POST",
    });
    fillForm(data.note);
    hideVersion();
    ui.saved.textContent = `Restored v${number}.`;
    await Promise.all([runSearch(), loadHistory()]);
  } catch (err) {
    ui.restored.textContent = `Not restored: ${err.message}`;
  }
}

export async function loadDeleted() {
  let items;
  try {
    items = (await json("/api/memories/history/deleted?limit=20")).deleted;
  } catch (err) {
    clear(ui.deleted).append(h("li", { class: "error-text" }, `Could not load: ${err.message}`));
    return;
  }
  clear(ui.deleted);
  if (!items.length) ui.deleted.append(h("li", { class: "meta empty" }, "Nothing deleted."));
  for (const item of items) {
    const li = h(
      "li",
      { class: "pending-item", dataset: { id: item.note_id } },
      h(
        "div",
        { class: "mem-item-head" },
        h("span", { class: "mem-item-title" }, item.title),
        h("span", { class: "meta" }, `deleted ${timeAgo(item.at)} · ${item.source_label}`),
      ),
      item.summary ? h("p", { class: "pending-content" }, item.summary) : null,
      h(
        "div",
        { class: "form-actions" },
        h(
          "button",
          {
            type: "button",
            onclick: async () => {
              try {
                const data = await json(
                  `/api/memories/${encodeURIComponent(item.note_id)}/history/${item.version}/restore`,
                  { method: "POST" },
                );
                await Promise.all([loadDeleted(), runSearch()]);
                await openNote(data.note.id);
              } catch (err) {
                li.append(h("span", { class: "error-text" }, ` ${err.message}`));
              }
            },
          },
          "Restore",
        ),
      ),
    );
    ui.deleted.append(li);
  }
}
