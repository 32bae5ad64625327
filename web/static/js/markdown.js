// A small, safe markdown renderer for model output.
//
// Safety comes from construction, not from cleaning: the text is never parsed as HTML.
// Every piece of it becomes a text node, and the only elements created are the ones in
// ALLOWED_TAGS. The only attribute taken from the text is a link's href, and only when it is
// an absolute http, https or mailto URL. So `<script>`, `<img onerror=...>` or
// `[x](javascript:...)` in a reply show up as plain text.
//
// Supported: paragraphs (single newlines are line breaks), headings, bullet and numbered
// lists (nested by indentation), block quotes, rules, simple tables, fenced code blocks with a
// copy button, inline code, bold, italic, strikethrough, links and bare URLs. Images are not
// loaded: their alt text is shown instead.

import { copyText, h } from "./dom.js";

export const ALLOWED_TAGS = new Set([
  "p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "blockquote", "hr", "br",
  "pre", "code", "strong", "em", "del", "a", "table", "thead", "tbody", "tr", "th", "td",
  "div", "span", "button",
]);

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);

/** The normalized URL if it is an absolute http(s)/mailto URL, else null. */
export function safeHref(raw) {
  const value = String(raw).trim();
  if (!/^(https?:\/\/|mailto:)/i.test(value)) return null;
  let url;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
}

/** Render markdown `text` into a DocumentFragment (safe for any input). */
export function renderMarkdown(text) {
  const frag = document.createDocumentFragment();
  const lines = String(text ?? "")
    .replace(/\r\n?/g, "\n")
    .split("\n")
    .map(expandTabs);
  renderBlocks(lines, frag, 0);
  return frag;
}

// --- blocks ---------------------------------------------------------------------------------

const FENCE = /^( {0,3})(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
const TABLE_SEP = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const MAX_DEPTH = 12;

function expandTabs(line) {
  const m = /^[ \t]+/.exec(line);
  return m ? m[0].replace(/\t/g, "    ") + line.slice(m[0].length) : line;
}

const indentOf = (line) => /^ */.exec(line)[0].length;

function dedent(line, n) {
  const strip = Math.min(n, indentOf(line));
  return line.slice(strip);
}

function isTableStart(lines, i) {
  return (
    lines[i].includes("|") &&
    i + 1 < lines.length &&
    lines[i + 1].includes("|") &&
    TABLE_SEP.test(lines[i + 1])
  );
}

function startsBlock(lines, i) {
  const line = lines[i];
  if (FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)) return true;
  const item = LIST_ITEM.exec(line);
  // Like CommonMark: a numbered list interrupts a paragraph only when it starts at 1.
  if (item && item[3] && (!/\d/.test(item[2]) || parseInt(item[2], 10) === 1)) return true;
  return isTableStart(lines, i);
}

function renderBlocks(lines, parent, depth) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    let m;
    if ((m = FENCE.exec(line))) {
      const [, indent, fence, lang] = m;
      const body = [];
      i++;
      while (i < lines.length && !isClosingFence(lines[i], fence)) {
        body.push(dedent(lines[i], indent.length));
        i++;
      }
      i++; // the closing fence (an unclosed fence runs to the end: a reply still streaming)
      parent.append(codeBlock(body.join("\n"), lang));
      continue;
    }
    if ((m = HEADING.exec(line))) {
      parent.append(h(`h${m[1].length}`, {}, inline(m[2] || "")));
      i++;
      continue;
    }
    if (RULE.test(line)) {
      parent.append(h("hr"));
      i++;
      continue;
    }
    if (QUOTE.test(line) && depth < MAX_DEPTH) {
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        inner.push(m[1]);
        i++;
      }
      const quote = h("blockquote");
      renderBlocks(inner, quote, depth + 1);
      parent.append(quote);
      continue;
    }
    if (LIST_ITEM.test(line) && depth < MAX_DEPTH) {
      i = renderList(lines, i, parent, depth);
      continue;
    }
    if (isTableStart(lines, i)) {
      i = renderTable(lines, i, parent);
      continue;
    }
    const para = [line.trim()];
    i++;
    while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) {
      para.push(lines[i].trim());
      i++;
    }
    parent.append(h("p", {}, inline(para.join("\n"))));
  }
}

function isClosingFence(line, fence) {
  const m = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(line);
  return m !== null && m[1][0] === fence[0] && m[1].length >= fence.length;
}

function renderList(lines, start, parent, depth) {
  const first = LIST_ITEM.exec(lines[start]);
  const baseIndent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const list = h(ordered ? "ol" : "ul");
  if (ordered) {
    const n = parseInt(first[2], 10);
    if (n !== 1) list.setAttribute("start", String(n));
  }
  const items = [];
  let item = null;
  let contentIndent = 0;
  let i = start;
  while (i < lines.length) {
    const line = lines[i];
    const m = LIST_ITEM.exec(line);
    if (m && m[1].length <= baseIndent + 1) {
      if (/\d/.test(m[2]) !== ordered) break; // another kind of list at this level
      item = [m[3] || ""];
      items.push(item);
      contentIndent = m[1].length + m[2].length + 1;
      i++;
      continue;
    }
    if (!line.trim()) {
      let j = i + 1;
      while (j < lines.length && !lines[j].trim()) j++;
      const next = j < lines.length ? lines[j] : null;
      const nextItem = next !== null ? LIST_ITEM.exec(next) : null;
      const continues =
        next !== null &&
        (indentOf(next) > baseIndent + 1 ||
          (nextItem && nextItem[1].length <= baseIndent + 1 && /\d/.test(nextItem[2]) === ordered));
      if (!continues) break;
      item.push("");
      i++;
      continue;
    }
    if (indentOf(line) > baseIndent + 1) {
      item.push(dedent(line, contentIndent));
      i++;
      continue;
    }
    // A lazy continuation: plain text right after the item's text.
    if (item[item.length - 1].trim() && !startsBlock(lines, i)) {
      item.push(line.trim());
      i++;
      continue;
    }
    break;
  }
  for (const itemLines of items) {
    const li = h("li");
    renderBlocks(itemLines, li, depth + 1);
    // Tight items: the first paragraph's content sits directly in the <li>.
    const p = li.firstElementChild;
    if (p && p.tagName === "P") p.replaceWith(...p.childNodes);
    list.append(li);
  }
  parent.append(list);
  return i;
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  const cells = [];
  let cell = "";
  for (let k = 0; k < row.length; k++) {
    if (row[k] === "\\" && row[k + 1] === "|") {
      cell += "|";
      k++;
    } else if (row[k] === "|") {
      cells.push(cell.trim());
      cell = "";
    } else {
      cell += row[k];
    }
  }
  cells.push(cell.trim());
  return cells;
}

function renderTable(lines, start, parent) {
  const header = splitRow(lines[start]);
  const aligns = splitRow(lines[start + 1]).map((spec) => {
    const left = spec.startsWith(":");
    const right = spec.endsWith(":");
    if (left && right) return "center";
    if (right) return "right";
    return left ? "left" : null;
  });
  const cellAttrs = (k) => (aligns[k] ? { class: `align-${aligns[k]}` } : {});
  const thead = h("thead", {}, h("tr", {}, header.map((c, k) => h("th", cellAttrs(k), inline(c)))));
  const tbody = h("tbody");
  let i = start + 2;
  while (i < lines.length && lines[i].trim() && lines[i].includes("|")) {
    const cells = splitRow(lines[i]);
    tbody.append(h("tr", {}, header.map((_, k) => h("td", cellAttrs(k), inline(cells[k] ?? "")))));
    i++;
  }
  parent.append(h("div", { class: "table-wrap" }, h("table", {}, thead, tbody)));
  return i;
}

function codeBlock(code, lang) {
  const copy = h("button", { type: "button", class: "copy-btn", "aria-label": "Copy code" }, "Copy");
  copy.addEventListener("click", async () => {
    const ok = await copyText(code);
    copy.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => {
      copy.textContent = "Copy";
    }, 1500);
  });
  return h(
    "div",
    { class: "codeblock" },
    h("div", { class: "codebar" }, h("span", { class: "code-lang" }, lang || "text"), copy),
    h("pre", {}, h("code", {}, code)),
  );
}

// --- inline ---------------------------------------------------------------------------------

const ESCAPABLE = /[!-/:-@[-`{-~]/;
const LINK =
  /\[((?:[^[\]\\]|\\.|\[[^[\]]*\])*)\]\(\s*<?([^\s<>()]*(?:\([^\s<>()]*\)[^\s<>()]*)*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)/y;
const BARE_URL = /(?:https?:\/\/|mailto:)[^\s<>"'`\u3000-\u303f\uff01-\uff0f\uff1a-\uff20]+/iy;
const EMPHASIS = [
  ["**", "strong"],
  ["__", "strong"],
  ["~~", "del"],
  ["*", "em"],
  ["_", "em"],
];
const WORD = /[\p{L}\p{N}]/u;

function inline(text) {
  const frag = document.createDocumentFragment();
  parseInline(text, frag, { depth: 0, links: true });
  return frag;
}

function findCloser(text, delim, from) {
  let j = from;
  while ((j = text.indexOf(delim, j)) !== -1) {
    const before = text[j - 1];
    const after = text[j + delim.length];
    const single = delim.length === 1;
    const partOfRun = single && (before === delim || after === delim);
    const intraword = delim[0] === "_" && after !== undefined && WORD.test(after);
    if (!partOfRun && !intraword && before !== undefined && !/\s/.test(before)) return j;
    j += single && after === delim ? 2 : 1;
  }
  return -1;
}

function trimUrl(url) {
  // Trailing punctuation belongs to the sentence; a ")" only if it has no "(" partner.
  let end = url.length;
  while (end > 0) {
    const c = url[end - 1];
    if (".,;:!?'\"".includes(c)) {
      end--;
    } else if (c === ")") {
      const opens = url.slice(0, end).split("(").length - 1;
      const closes = url.slice(0, end).split(")").length - 1;
      if (closes > opens) end--;
      else break;
    } else {
      break;
    }
  }
  return url.slice(0, end);
}

function parseInline(text, parent, ctx) {
  let buf = "";
  const flush = () => {
    if (buf) parent.append(document.createTextNode(buf));
    buf = "";
  };
  let i = 0;
  outer: while (i < text.length) {
    const c = text[i];
    if (c === "\\" && i + 1 < text.length && ESCAPABLE.test(text[i + 1])) {
      buf += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "\n") {
      flush();
      parent.append(h("br"));
      i++;
      continue;
    }
    if (c === "`") {
      let n = 1;
      while (text[i + n] === "`") n++;
      const run = "`".repeat(n);
      let j = i + n;
      let close = -1;
      while ((j = text.indexOf(run, j)) !== -1) {
        if (text[j + n] !== "`") {
          close = j;
          break;
        }
        while (text[j] === "`") j++;
      }
      if (close === -1) {
        buf += run;
        i += n;
        continue;
      }
      flush();
      let code = text.slice(i + n, close).replace(/\n/g, " ");
      if (code.length > 2 && code.startsWith(" ") && code.endsWith(" ") && code.trim()) {
        code = code.slice(1, -1);
      }
      parent.append(h("code", {}, code));
      i = close + n;
      continue;
    }
    if (ctx.depth < MAX_DEPTH) {
      const image = c === "!" && text[i + 1] === "[";
      if (c === "[" || image) {
        const offset = image ? 1 : 0;
        LINK.lastIndex = i + offset;
        const m = LINK.exec(text);
        if (m) {
          flush();
          const href = image ? null : safeHref(m[2]);
          const inner = { depth: ctx.depth + 1, links: false };
          if (href && ctx.links) {
            const a = h("a", { href, rel: "noopener noreferrer", target: "_blank" });
            parseInline(m[1], a, inner);
            parent.append(a);
          } else {
            // Unsafe or relative link, or an image: keep only its text.
            parseInline(m[1], parent, inner);
          }
          i += offset + m[0].length;
          continue;
        }
      }
      for (const [delim, tag] of EMPHASIS) {
        if (!text.startsWith(delim, i)) continue;
        const after = text[i + delim.length];
        if (after === undefined || /\s/.test(after)) continue;
        if (delim[0] === "_" && i > 0 && WORD.test(text[i - 1])) continue;
        const close = findCloser(text, delim, i + delim.length);
        if (close <= i + delim.length) continue;
        flush();
        const el = h(tag);
        parseInline(text.slice(i + delim.length, close), el, { ...ctx, depth: ctx.depth + 1 });
        parent.append(el);
        i = close + delim.length;
        continue outer;
      }
    }
    if (ctx.links && (c === "h" || c === "H" || c === "m" || c === "M")) {
      const prev = text[i - 1];
      BARE_URL.lastIndex = i;
      const m = prev === undefined || !/[\w/]/.test(prev) ? BARE_URL.exec(text) : null;
      const url = m ? trimUrl(m[0]) : "";
      const href = url && url.length > 8 ? safeHref(url) : null;
      if (href) {
        flush();
        parent.append(h("a", { href, rel: "noopener noreferrer", target: "_blank" }, url));
        i += url.length;
        continue;
      }
    }
    buf += c;
    i++;
  }
  flush();
}
