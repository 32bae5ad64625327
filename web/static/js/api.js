// HTTP calls to the app: the bearer token, 401 handling, errors, and SSE over POST.

const TOKEN_KEY = "cm.token";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

let askToken = async () => null; // replaced by the page: shows the token dialog
let asking = null;
let locked = false; // the server wants a token and we have none it accepts
const lockListeners = new Set();

/** `listener(locked)` whenever the page becomes locked (token missing or refused) or unlocked. */
export function onLockChange(listener) {
  lockListeners.add(listener);
}

export function isLocked() {
  return locked;
}

function setLocked(value) {
  if (locked === value) return;
  locked = value;
  for (const listener of lockListeners) listener(locked);
}

export const LOCKED_MESSAGE = "Locked: this server needs its API token (CLAUDE_MEMORY_API_TOKEN).";

/** `ask(reason)` resolves to the token the user typed, or null if they gave up. */
export function onTokenNeeded(ask) {
  askToken = ask;
}

export function getToken() {
  return localStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

function headers(extra) {
  const out = { ...extra };
  const token = getToken();
  if (token) out.Authorization = `Bearer ${token}`;
  return out;
}

async function tokenAfter401() {
  // One dialog for many requests failing at once.
  asking ??= askToken(
    getToken()
      ? "That token was refused. Enter the value of CLAUDE_MEMORY_API_TOKEN set on the server."
      : "This server needs a token.",
  )
    .then((token) => {
      if (token) setToken(token);
      return Boolean(token);
    })
    .finally(() => {
      asking = null;
    });
  return asking;
}

async function errorFrom(response) {
  let detail = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (typeof body.detail === "string") detail = body.detail;
    else if (Array.isArray(body.detail)) detail = body.detail.map((d) => d.msg).join("; ");
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, detail);
}

/** Ask for the token again (a "Locked" control); resolves to true once one was entered. */
export async function unlock() {
  return tokenAfter401();
}

/** fetch() with the token; asks for a token on 401 and retries; throws ApiError if not ok.
 *  A 401 the user does not answer leaves the page locked, with a plain message. */
export async function request(path, { method = "GET", body, signal } = {}) {
  for (;;) {
    const init = { method, signal, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await fetch(path, init);
    if (response.status === 401) {
      if (await tokenAfter401()) continue;
      setLocked(true);
      throw new ApiError(401, LOCKED_MESSAGE);
    }
    setLocked(false);
    if (!response.ok) throw await errorFrom(response);
    return response;
  }
}

export async function json(path, options) {
  const response = await request(path, options);
  return response.json();
}

/** Parse one SSE block ("event: x\ndata: {...}") into {event, data}, or null. */
export function parseEvent(block) {
  let event = "message";
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!data.length) return null;
  try {
    return { event, data: JSON.parse(data.join("\n")) };
  } catch {
    return { event, data: { raw: data.join("\n") } };
  }
}

/** POST `body` to an SSE endpoint and yield its events as they arrive. */
export async function* stream(path, body, { signal } = {}) {
  const response = await request(path, { method: "POST", body, signal });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let match;
    while ((match = /\r?\n\r?\n/.exec(buffer))) {
      const parsed = parseEvent(buffer.slice(0, match.index));
      buffer = buffer.slice(match.index + match[0].length);
      if (parsed) yield parsed;
    }
  }
  buffer += decoder.decode();
  const last = buffer.trim() ? parseEvent(buffer) : null;
  if (last) yield last;
}
