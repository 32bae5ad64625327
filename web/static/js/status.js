// The status indicator: what /health says, and a hint when something is missing.

import { isLocked, onLockChange } from "./api.js";
import { $, clear, h } from "./dom.js";

const REFRESH_MS = 30000;
const CHECKING_MS = 2000; // while the model endpoint is being probed, look again soon

// The model endpoint's states (agent/endpoint.py): false keeps turns from running.
const ENDPOINT = {
  reachable: { ok: true, text: "reachable" },
  unverified: { ok: true, text: "answers (key not verified)" },
  checking: { ok: null, text: "checking…" },
  unreachable: { ok: false, text: "unreachable" },
  credentials_refused: { ok: false, text: "credentials refused" },
  not_messages_api: { ok: false, text: "not an Anthropic API" },
};

export function initStatus({ onChangeToken }) {
  const button = $("#status");
  const panel = $("#status-panel");
  button.addEventListener("click", (event) => {
    event.stopPropagation();
    const open = panel.hidden;
    panel.hidden = !open;
    button.setAttribute("aria-expanded", String(open));
    if (open) refresh();
  });
  document.addEventListener("click", (event) => {
    if (!panel.hidden && !panel.contains(event.target)) {
      panel.hidden = true;
      button.setAttribute("aria-expanded", "false");
    }
  });
  $("#token-change").addEventListener("click", () => {
    panel.hidden = true;
    onChangeToken();
  });
  onLockChange(() => refresh());
  refresh();
  setInterval(refresh, REFRESH_MS);
}

/** A locked page says so in the status, whatever /health says (it needs no token). */
function showLocked() {
  const button = $("#status");
  button.dataset.state = "locked";
  $("#status-label").textContent = "Locked";
  button.title = "This server needs its API token: use “Set API token…”";
}

/** The checks shown in the panel, from a /health body. */
export function checks(health) {
  const cli = health.claude_cli || {};
  const db = health.database || {};
  const feishu = health.feishu || {};
  const endpoint = health.model_endpoint || {};
  const model = ENDPOINT[endpoint.state] || { ok: null, text: endpoint.state || "unknown" };
  const items = [
    { label: "Model endpoint", ok: model.ok, text: model.text },
    { label: "Claude CLI", ok: Boolean(cli.found), text: cli.found ? "found" : "not found" },
    {
      label: "Credentials",
      ok: Boolean(cli.credentials),
      text: cli.credentials ? "present" : "not in the environment",
    },
    {
      label: "Memory index",
      ok: Boolean(db.ok),
      text: db.ok ? `ok${Number.isFinite(db.notes) ? ` · ${db.notes} note${db.notes === 1 ? "" : "s"}` : ""}` : "error",
    },
    feishu.enabled
      ? { label: "Feishu", ok: Boolean(feishu.connected), text: feishu.connected ? "connected" : "not connected" }
      : { label: "Feishu", ok: null, text: "not configured" },
  ];
  const hints = [];
  if (model.ok === false && endpoint.hint) hints.push(`Model endpoint ${model.text}: ${endpoint.hint}.`);
  if (cli.hint) hints.push(cli.hint);
  if (!db.ok && db.error) hints.push(`Index: ${db.error}. Try: claude-memory memory reindex`);
  if (feishu.enabled && !feishu.connected) {
    hints.push("Feishu is configured but not connected: check FEISHU_APP_ID / FEISHU_APP_SECRET and the log.");
  }
  return { items, hints };
}

let soon = null;

async function refresh() {
  clearTimeout(soon);
  const button = $("#status");
  const label = $("#status-label");
  let health;
  try {
    const response = await fetch("/health");
    if (!response.ok) throw new Error(`${response.status}`);
    health = await response.json();
  } catch {
    button.dataset.state = "down";
    label.textContent = "Offline";
    clear($("#status-items")).append(h("li", { class: "bad" }, "The server does not answer."));
    $("#status-hints").textContent = "";
    return;
  }
  if (health.model_endpoint?.state === "checking") soon = setTimeout(refresh, CHECKING_MS);
  const { items, hints } = checks(health);
  const problems = items.filter((i) => i.ok === false);
  const checking = health.model_endpoint?.state === "checking";
  // Never "Ready" before the model endpoint answered: it may be down or another server.
  button.dataset.state = problems.length ? "warn" : checking ? "unknown" : "ok";
  label.textContent = problems.length ? `Check setup (${problems.length})` : checking ? "Checking…" : "Ready";
  button.title = problems.length ? hints.join("\n") : checking ? "Asking the model endpoint…" : "Everything needed is in place";
  if (isLocked()) showLocked();
  clear($("#status-items"));
  for (const item of items) {
    const cls = item.ok === null ? "neutral" : item.ok ? "good" : "bad";
    $("#status-items").append(
      h(
        "li",
        { class: cls },
        h("span", { class: "mark", "aria-hidden": "true" }, item.ok === null ? "–" : item.ok ? "✓" : "✕"),
        h("span", { class: "status-name" }, item.label),
        h("span", { class: "meta" }, item.text),
      ),
    );
  }
  $("#status-hints").textContent = hints.join(" ");
}
