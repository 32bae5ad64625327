// The chat view: conversations on the side, the current conversation's turns, the composer.

import { ApiError, json, request, stream, unlock } from "./api.js";
import { $, clear, formatCost, h, timeAgo } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

const CURRENT_KEY = "cm.conversation";

const TOOL_LABELS = {
  started: { icon: "…", label: "running" },
  ok: { icon: "✓", label: "done" },
  error: { icon: "✕", label: "failed" },
  denied: { icon: "⊘", label: "refused" },
};

const state = {
  current: localStorage.getItem(CURRENT_KEY) || null,
  conversations: [],
  busy: null, // {conversationId, controller, turnRoot} while a reply streams
  pollTimer: null,
};

let ui = null;
let confirmAction = async () => true;
let openNote = () => {};

export function initChat({ confirm, onOpenNote }) {
  confirmAction = confirm;
  openNote = onOpenNote;
  ui = {
    list: $("#conv-list"),
    title: $("#conv-title"),
    meta: $("#conv-meta"),
    messages: $("#messages"),
    form: $("#composer"),
    input: $("#input"),
    send: $("#send"),
    stop: $("#stop"),
    sidebar: $("#sidebar"),
    scrim: $("#scrim"),
    menu: $("#menu-btn"),
  };
  setupComposer();
  $("#new-conv").addEventListener("click", () => {
    newConversation();
    closeDrawer();
  });
  ui.stop.addEventListener("click", stop);
  ui.menu.addEventListener("click", () => (ui.sidebar.classList.contains("open") ? closeDrawer() : openDrawer()));
  ui.scrim.addEventListener("click", closeDrawer);
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && state.busy) stop();
  });
  // Conversations also start elsewhere (Feishu, the API): refresh when the page comes back.
  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") refreshList();
  });
  showEmpty();
  refreshList();
  if (state.current) loadConversation(state.current);
}

// --- composer ---------------------------------------------------------------------------------

function setupComposer() {
  let composing = false;
  ui.input.addEventListener("compositionstart", () => {
    composing = true;
  });
  ui.input.addEventListener("compositionend", () => {
    composing = false;
  });
  ui.input.addEventListener("keydown", (event) => {
    if (event.key !== "Enter") return;
    // An input method (Chinese, Japanese, ...) uses Enter to pick a candidate: never send then.
    // keyCode 229 covers browsers that end the composition before this keydown.
    if (event.isComposing || composing || event.keyCode === 229) return;
    if (event.shiftKey || event.altKey) return; // a new line
    event.preventDefault();
    ui.form.requestSubmit();
  });
  ui.input.addEventListener("input", autoGrow);
  ui.form.addEventListener("submit", (event) => {
    event.preventDefault();
    send();
  });
}

function autoGrow() {
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, 240)}px`;
}

function setBusy(busy) {
  state.busy = busy;
  ui.send.hidden = Boolean(busy);
  ui.stop.hidden = !busy;
  ui.form.classList.toggle("busy", Boolean(busy));
}

// --- conversations ----------------------------------------------------------------------------

function setCurrent(id) {
  state.current = id;
  if (id) localStorage.setItem(CURRENT_KEY, id);
  else localStorage.removeItem(CURRENT_KEY);
  markCurrent();
}

export async function refreshList() {
  try {
    const data = await json("/api/conversations");
    state.conversations = data.conversations;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      // Locked: say so plainly and offer the way in, never the server's raw detail.
      const retry = h("button", { class: "link-btn", type: "button" }, "Enter the API token…");
      retry.addEventListener("click", async () => {
        if (await unlock()) refreshList();
      });
      clear(ui.list).append(h("li", { class: "meta locked" }, "Locked. ", retry));
      return;
    }
    clear(ui.list).append(h("li", { class: "error-text" }, `Could not load conversations: ${err.message}`));
    return;
  }
  clear(ui.list);
  if (!state.conversations.length) {
    ui.list.append(h("li", { class: "meta empty" }, "No conversations yet."));
  }
  for (const conv of state.conversations) {
    const stats = [`${conv.turns} turn${conv.turns === 1 ? "" : "s"}`, formatCost(conv.cost_usd), timeAgo(conv.updated)];
    ui.list.append(
      h(
        "li",
        { class: "conv", dataset: { id: conv.id } },
        h(
          "button",
          { type: "button", class: "conv-open", onclick: () => switchTo(conv.id) },
          h("span", { class: "conv-name" }, conv.title || conv.id),
          h(
            "span",
            { class: "conv-stats" },
            conv.source && conv.source !== "web" ? h("span", { class: "badge" }, conv.source) : null,
            stats.filter(Boolean).join(" · "),
          ),
        ),
        h(
          "button",
          {
            type: "button",
            class: "conv-delete icon-btn",
            "aria-label": `Delete conversation ${conv.title || conv.id}`,
            title: "Delete",
            onclick: () => deleteConversation(conv),
          },
          "×",
        ),
      ),
    );
  }
  markCurrent();
  const current = state.conversations.find((c) => c.id === state.current);
  if (current) showHeader(current);
}

function markCurrent() {
  for (const li of ui.list.querySelectorAll("li.conv")) {
    const open = li.querySelector(".conv-open");
    if (li.dataset.id === state.current) open.setAttribute("aria-current", "true");
    else open.removeAttribute("aria-current");
  }
}

function showHeader(conv) {
  ui.title.textContent = conv ? conv.title || conv.id : "New conversation";
  ui.meta.textContent = conv
    ? [`${conv.turns} turn${conv.turns === 1 ? "" : "s"}`, formatCost(conv.cost_usd) || "$0"].join(" · ")
    : "";
}

function showEmpty() {
  clear(ui.messages).append(
    h(
      "div",
      { class: "empty-chat" },
      h("p", {}, "Start a conversation."),
      h("p", { class: "meta" }, "Enter sends · Shift+Enter adds a line · Esc stops a reply"),
    ),
  );
}

export function newConversation() {
  stopPolling();
  setCurrent(null);
  showHeader(null);
  showEmpty();
  ui.input.focus();
}

async function switchTo(id) {
  closeDrawer();
  if (id === state.current) return;
  setCurrent(id);
  await loadConversation(id);
}

async function loadConversation(id) {
  stopPolling();
  let data;
  try {
    data = await json(`/api/conversations/${encodeURIComponent(id)}`);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      if (state.current === id) newConversation();
      return;
    }
    clear(ui.messages).append(errorBox(`Could not load the conversation: ${err.message}`));
    return;
  }
  if (state.current !== id) return; // the user moved on meanwhile
  showHeader(data);
  clear(ui.messages);
  for (const turn of data.history) {
    // The turn streaming on this page is shown from its own view below.
    if (turn.status === "running" && state.busy?.conversationId === id) continue;
    const view = createTurn(turn.message);
    view.showMemory(turn.injected || []);
    // The turn's tool steps, refused and failed ones included, as they ended.
    (turn.tools || []).forEach((step, i) => view.tool({ tool_use_id: `saved-${i}`, ...step }));
    if (turn.status === "running") continue; // on record as it runs: its end comes later
    view.finish({
      reply: turn.reply,
      is_error: turn.is_error,
      status: turn.status,
      cost_usd: turn.cost_usd,
      started: turn.started,
    });
  }
  if (state.busy?.conversationId === id) {
    // Back to the conversation whose reply is streaming here: show that turn again.
    ui.messages.append(state.busy.turnRoot);
  } else if (!data.history.length && !data.running) {
    showEmpty();
  }
  const running = data.running || data.history.at(-1)?.status === "running";
  if (running && state.busy?.conversationId !== id) {
    // A reply is being written (started before a reload, or from elsewhere): check back soon.
    ui.messages.append(h("p", { class: "notice" }, "A reply is still being written…"));
    state.pollTimer = setTimeout(() => loadConversation(id), 2000);
  }
  scrollToEnd(true);
}

function stopPolling() {
  clearTimeout(state.pollTimer);
  state.pollTimer = null;
}

async function deleteConversation(conv) {
  const ok = await confirmAction(`Delete the conversation “${conv.title || conv.id}” and its history?`);
  if (!ok) return;
  try {
    await request(`/api/conversations/${encodeURIComponent(conv.id)}`, { method: "DELETE" });
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 404)) {
      alertError(`Could not delete: ${err.message}`);
      return;
    }
  }
  if (conv.id === state.current) newConversation();
  await refreshList();
}

// --- turns ------------------------------------------------------------------------------------

function errorBox(message) {
  return h("div", { class: "msg assistant error" }, h("div", { class: "content" }, message));
}

function alertError(message) {
  ui.messages.append(errorBox(message));
  scrollToEnd(true);
}

function nearBottom() {
  const m = ui.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
}

function scrollToEnd(force = false) {
  if (force || nearBottom()) ui.messages.scrollTop = ui.messages.scrollHeight;
}

/** "Not relevant" beside a recalled note: prompts like this one stop getting it (issue #19). */
function notRelevantButton(note, prompt) {
  const button = h("button", { type: "button", class: "link-btn not-relevant", title: "Not relevant to this prompt: similar prompts will not get it" }, "Not relevant");
  button.onclick = async () => {
    button.disabled = true;
    try {
      await json(`/api/memories/${encodeURIComponent(note.id)}/not-relevant`, { method: "POST", body: { prompt } });
      button.textContent = "Marked not relevant";
      button.closest("li").classList.add("dismissed");
    } catch (error) {
      button.disabled = false;
      button.textContent = "Not relevant";
      button.title = error.message;
    }
  };
  return button;
}

function memoryRow(notes, prompt = "") {
  const list = h("ul", { class: "memory-notes" });
  const details = h(
    "details",
    { class: "memory-used" },
    h("summary", {}, h("span", { class: "memory-label" }, "Memory used"), h("span", { class: "count" }, "0")),
    list,
  );
  const add = (more) => {
    for (const note of more) {
      const title = note.title || note.id || "(untitled)";
      list.append(
        h(
          "li",
          {},
          note.id
            ? h("button", { type: "button", class: "link-btn", onclick: () => openNote(note.id) }, title)
            : h("span", {}, title),
          note.type ? h("span", { class: "badge" }, note.type) : null,
          note.reason ? h("span", { class: "meta" }, note.reason) : null,
          note.id && prompt.trim() ? notRelevantButton(note, prompt) : null,
        ),
      );
    }
    details.querySelector(".count").textContent = String(list.children.length);
    details.hidden = list.children.length === 0;
  };
  add(notes);
  return { element: details, add };
}

function oneLine(text, limit = 160) {
  const line = text.split(/\s+/).join(" ").trim();
  return line.length > limit ? `${line.slice(0, limit - 1)}…` : line;
}

function toolRow(event) {
  const icon = h("span", { class: "tool-icon", "aria-hidden": "true" });
  const status = h("span", { class: "tool-status" });
  const reason = h("span", { class: "tool-reason" });
  const detail = h("pre", { class: "tool-detail" });
  const row = h(
    "details",
    { class: "tool" },
    h(
      "summary",
      {},
      icon,
      h("span", { class: "tool-name" }, event.name),
      h("span", { class: "tool-input" }, event.summary || ""),
      status,
      reason,
    ),
    detail,
  );
  const update = (ev) => {
    const look = TOOL_LABELS[ev.status] || { icon: "?", label: ev.status };
    row.dataset.status = ev.status;
    icon.textContent = look.icon;
    status.textContent = look.label;
    if (ev.summary) row.querySelector(".tool-input").textContent = ev.summary;
    detail.textContent = ev.detail || (ev.status === "started" ? "Running…" : "No output.");
    // A refusal or failure says why without having to open the row.
    const failed = ev.status === "error" || ev.status === "denied";
    reason.textContent = failed ? oneLine(ev.detail || "") : "";
  };
  update(event);
  return { element: row, update, name: event.name };
}

/** One exchange: the user's message and the assistant's answer, filled in as events arrive. */
function createTurn(message) {
  const memory = memoryRow([], message);
  const steps = h("div", { class: "steps" });
  const content = h("div", { class: "content md" });
  const footer = h("div", { class: "msg-footer meta" });
  const assistant = h("div", { class: "msg assistant" }, memory.element, steps, content, footer);
  const root = h(
    "article",
    { class: "turn" },
    h("div", { class: "msg user" }, h("div", { class: "bubble" }, message)),
    assistant,
  );
  ui.messages.append(root);
  const tools = new Map();
  let text = "";
  let frame = 0;
  let retry = null;

  const render = () => {
    frame = 0;
    content.replaceChildren(renderMarkdown(text));
    scrollToEnd();
  };

  return {
    root,
    streaming(on) {
      assistant.classList.toggle("streaming", on);
    },
    appendText(delta) {
      retry = retry?.remove() ?? null; // an answer is coming: the retry is over
      text += delta;
      frame ||= requestAnimationFrame(render);
    },
    tool(event) {
      const known = tools.get(event.tool_use_id);
      if (known) known.update(event);
      else {
        const row = toolRow(event);
        tools.set(event.tool_use_id, row);
        steps.append(row.element);
      }
      scrollToEnd();
    },
    permission(event) {
      if (event.allowed) return;
      // The refused tool's own row shows the reason when its result arrives.
      const running = [...tools.values()].some(
        (row) => row.element.dataset.status === "started" && row.name === event.tool_name,
      );
      if (running) return;
      steps.append(
        h(
          "div",
          { class: "permission-denied" },
          h("span", { "aria-hidden": "true" }, "⊘ "),
          `Permission refused: ${event.tool_name}`,
          event.reason ? h("span", { class: "meta" }, ` — ${event.reason}`) : null,
        ),
      );
    },
    showMemory(notes) {
      memory.add(notes);
    },
    retrying({ attempt, max_retries, wait_seconds, reason }) {
      // The CLI retries a failed model request: one line, replaced by the next attempt.
      retry ??= steps.appendChild(h("div", { class: "retrying meta", role: "status" }));
      retry.textContent = `Retrying (${attempt}/${max_retries}) in ${Math.round(wait_seconds)} s: ${reason}`;
      scrollToEnd();
    },
    finish({ reply, is_error, status, cost_usd, started, memory_changes }) {
      cancelAnimationFrame(frame);
      frame = 0;
      retry?.remove();
      text = reply ?? text;
      content.replaceChildren(renderMarkdown(text));
      assistant.classList.remove("streaming");
      // Stopping on request is not a failure: a neutral "Stopped", never the red error look.
      const stopped = status === "stopped";
      assistant.classList.toggle("error", Boolean(is_error) && !stopped);
      assistant.classList.toggle("stopped", stopped);
      const bits = [];
      if (stopped) bits.push(h("span", { class: "badge badge-stopped" }, "Stopped"));
      else if (status === "timed_out") bits.push(h("span", { class: "badge badge-error" }, "Timed out"));
      else if (status === "interrupted") bits.push(h("span", { class: "badge badge-error" }, "Interrupted"));
      else if (is_error) bits.push(h("span", { class: "badge badge-error" }, "Error"));
      if (started) bits.push(h("span", {}, new Date(started * 1000).toLocaleString()));
      if (cost_usd) bits.push(h("span", {}, formatCost(cost_usd)));
      footer.replaceChildren(...bits);
      if (memory_changes?.length) footer.after(memoryChanges(memory_changes));
      scrollToEnd();
    },
  };
}

/** The turn's memory changes (docs/permissions.md, "Memory"): each made one with its one-step
 * undo, each waiting one with Confirm and Discard. */
function memoryChanges(changes) {
  const list = h("ul", { class: "memory-changes meta" });
  for (const change of changes) {
    const li = h("li", {}, `${change.status === "waiting" ? "Waits for you" : "Memory changed"}: ${change.action} · ${change.title}`);
    const call = async (step, label) => {
      try {
        await json(step.path, { method: step.method });
        li.append(h("span", {}, ` (${label})`));
      } catch (err) {
        li.append(h("span", { class: "error-text" }, ` ${err.message}`));
      }
      for (const button of li.querySelectorAll("button")) button.disabled = true;
    };
    if (change.status === "waiting" && change.confirm) {
      li.append(" ", h("button", { type: "button", onclick: () => call(change.confirm, "confirmed") }, "Confirm"));
    }
    if (change.undo) {
      const label = change.status === "waiting" ? "Discard" : "Undo";
      li.append(" ", h("button", { type: "button", onclick: () => call(change.undo, label === "Undo" ? "undone" : "discarded") }, label));
    }
    list.append(li);
  }
  return list;
}

async function send() {
  const message = ui.input.value;
  if (!message.trim() || state.busy) return;
  ui.input.value = "";
  autoGrow();
  if (!state.current) clear(ui.messages);
  ui.messages.querySelector(".empty-chat")?.remove();
  const turn = createTurn(message);
  turn.streaming(true);
  scrollToEnd(true);
  const controller = new AbortController();
  const busy = { conversationId: state.current, controller, turnRoot: turn.root };
  setBusy(busy);
  const body = state.current
    ? { message, conversation_id: state.current }
    : { message, new_conversation: true };
  let finished = false;
  try {
    for await (const { event, data } of stream("/api/chat/stream", body, { signal: controller.signal })) {
      switch (event) {
        case "start":
          busy.conversationId = data.conversation_id;
          if (state.current !== data.conversation_id) {
            setCurrent(data.conversation_id);
            refreshList();
          }
          break;
        case "text_delta":
          turn.appendText(data.text || "");
          break;
        case "tool":
          turn.tool(data);
          break;
        case "permission":
          turn.permission(data);
          break;
        case "memory":
          turn.showMemory(data.notes || []);
          break;
        case "retrying":
          turn.retrying(data);
          break;
        case "result":
          turn.finish(data);
          finished = true;
          settle(busy); // the reply is whole: the next message may go while the stream closes
          break;
        case "error":
          turn.finish({ reply: data.message || "The turn failed.", is_error: true });
          finished = true;
          settle(busy);
          break;
        default:
          break; // unknown events are skipped
      }
    }
    if (!finished) turn.finish({ reply: "The connection closed before the reply finished.", is_error: true });
  } catch (err) {
    const reply =
      err.name === "AbortError"
        ? "Stopped. The server may still finish this turn; it will show in the history."
        : `Could not send: ${err.message}`;
    turn.finish({ reply, is_error: true, status: err.name === "AbortError" ? "stopped" : "failed" });
    if (err instanceof ApiError && !state.current) ui.input.value = message;
  } finally {
    settle(busy);
    refreshList();
  }
}

/** Not busy any more with `busy`'s turn (a later turn's busy state is left alone). */
function settle(busy) {
  if (state.busy === busy) setBusy(null);
}

async function stop() {
  const busy = state.busy;
  if (!busy) return;
  ui.stop.disabled = true;
  try {
    const id = busy.conversationId;
    const result = id
      ? await json(`/api/conversations/${encodeURIComponent(id)}/interrupt`, { method: "POST" })
      : { interrupted: false };
    // Nothing to interrupt on the server yet: stop listening instead.
    if (!result.interrupted) busy.controller.abort();
  } catch {
    busy.controller.abort();
  } finally {
    ui.stop.disabled = false;
  }
}

// --- phone drawer -----------------------------------------------------------------------------

function openDrawer() {
  ui.sidebar.classList.add("open");
  ui.scrim.hidden = false;
  ui.menu.setAttribute("aria-expanded", "true");
}

function closeDrawer() {
  ui.sidebar.classList.remove("open");
  ui.scrim.hidden = true;
  ui.menu.setAttribute("aria-expanded", "false");
}
