// Entry point: views, dialogs, and the wiring between chat, memory and status.

import { onTokenNeeded, setToken } from "./api.js";
import { initChat, refreshList } from "./chat.js";
import { $ } from "./dom.js";
import { initMemory, openNote, showMemory } from "./memory.js";
import { initStatus } from "./status.js";

/** Ask for the API token; resolves to the token, or null when cancelled. */
function askToken(reason) {
  const dialog = $("#token-dialog");
  const input = $("#token-input");
  $("#token-reason").textContent = reason || "";
  input.value = "";
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => resolve(dialog.returnValue === "ok" && input.value.trim() ? input.value.trim() : null),
      { once: true },
    );
    dialog.returnValue = "";
    dialog.showModal();
    input.focus();
  });
}

/** A confirm dialog that is part of the page (not window.confirm). */
function confirmAction(text, action = "Delete") {
  const dialog = $("#confirm-dialog");
  $("#confirm-text").textContent = text;
  $("#confirm-ok").textContent = action;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
  });
}

function showView(name) {
  const view = name === "memory" ? "memory" : "chat";
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.setAttribute("aria-selected", String(tab.dataset.view === view));
  }
  $("#chat-view").hidden = view !== "chat";
  $("#memory-view").hidden = view !== "memory";
  document.body.dataset.view = view;
  if (view === "memory") showMemory();
  else $("#input").focus({ preventScroll: true });
}

function route() {
  showView(location.hash === "#memory" ? "memory" : "chat");
}

function start() {
  onTokenNeeded(askToken);
  initChat({
    confirm: confirmAction,
    onOpenNote: async (id) => {
      location.hash = "#memory";
      await showMemory();
      await openNote(id);
    },
  });
  initMemory({ confirm: confirmAction });
  initStatus({
    onChangeToken: async () => {
      const token = await askToken("");
      if (token) {
        setToken(token);
        refreshList();
      }
    },
  });
  for (const tab of document.querySelectorAll("[role=tab]")) {
    tab.addEventListener("click", () => {
      location.hash = tab.dataset.view === "memory" ? "#memory" : "#chat";
    });
  }
  window.addEventListener("hashchange", route);
  route();
  document.body.dataset.ready = "true";
}

start();
