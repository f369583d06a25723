// Token playground: hand-written, no dependencies, no build step. Talks only to this service (relative URLs).
// Text is always rendered with textContent (never parsed as HTML).
"use strict";

(() => {
  const DEBOUNCE_MS = 250;
  const MAX_DRAWN = 20000; // tokens drawn as spans; the count always covers the whole text
  const TOKEN_KEY = "tokenizer-service.token"; // sessionStorage only: gone when the tab closes
  const AUTH_REQUIRED = document.documentElement.dataset.auth === "required";
  const SAMPLES = {
    en: "The quick brown fox jumps over the lazy dog. Tokenizers split text into pieces that a model can read.",
    ja: "東京は日本の首都です。トークナイザーはテキストを小さな単位に分割します。",
    code: "def greet(name: str) -> str:\n    return f\"Hello, {name}!\"\n\nprint(greet(\"world\"))\n",
    emoji: "Good morning 🌅! Ça va? 👩‍💻 naïve café",
  };

  const $ = (id) => document.getElementById(id);
  const el = {
    target: $("target"), text: $("text"), tokens: $("tokens"), status: $("status"), tooltip: $("tooltip"),
    count: $("stat-count"), chars: $("stat-chars"), bytes: $("stat-bytes"), bpt: $("stat-bpt"),
    context: $("stat-context"), cost: $("stat-cost"), breakdown: $("stat-breakdown"), bar: $("context-bar"),
    compareBody: $("compare-body"),
    decodeIds: $("decode-ids"), decodeOut: $("decode-out"), auth: $("auth"), authForm: $("auth-form"),
    authToken: $("auth-token"), authMessage: $("auth-message"), forget: $("forget-token"),
  };
  const utf8 = new TextEncoder();
  const numberFmt = new Intl.NumberFormat("en-US");

  let tokenizers = []; // GET /tokenizers summaries
  let token = sessionStorage.getItem(TOKEN_KEY);
  let tokenPrompt = null;

  // ------------------------------------------------------------------ API (bearer token on demand)

  class ApiError extends Error {
    constructor(status, body) {
      const err = body && body.error ? body.error : { type: "http_" + status, message: "HTTP " + status };
      super(err.message);
      this.status = status;
      this.type = err.type;
    }
  }

  function askToken(message) {
    if (!tokenPrompt) {
      tokenPrompt = new Promise((resolve) => {
        el.authMessage.textContent = message;
        el.authToken.value = "";
        const submit = (event) => {
          event.preventDefault();
          const value = el.authToken.value.trim();
          if (!value) return;
          token = value;
          sessionStorage.setItem(TOKEN_KEY, value);
          el.forget.hidden = false;
          el.authForm.removeEventListener("submit", submit);
          el.auth.close();
          tokenPrompt = null;
          resolve();
        };
        el.authForm.addEventListener("submit", submit);
        el.auth.showModal();
        el.authToken.focus();
      });
    }
    return tokenPrompt;
  }

  async function api(path, body, signal) {
    for (;;) {
      if (AUTH_REQUIRED && !token) {
        await askToken("This service needs a bearer token. It is kept in this tab's session storage only.");
      }
      const headers = { Accept: "application/json" };
      if (body !== undefined) headers["Content-Type"] = "application/json";
      if (token) headers.Authorization = "Bearer " + token;
      const response = await fetch(path, {
        method: body === undefined ? "GET" : "POST", headers, signal,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      if (response.status === 401) {
        token = null;
        sessionStorage.removeItem(TOKEN_KEY);
        await askToken("The service refused that token (or needs one): enter the bearer token.");
        continue;
      }
      const data = await response.json().catch(() => null);
      if (!response.ok) throw new ApiError(response.status, data);
      return data;
    }
  }

  const isAbort = (err) => err && err.name === "AbortError";

  // ------------------------------------------------------------------ the picker

  function selected() {
    const [kind, ...rest] = el.target.value.split(":");
    return { kind, name: rest.join(":") };
  }

  function targetBody() {
    const { kind, name } = selected();
    return kind === "model" ? { model: name } : { tokenizer: name };
  }

  function selectedKind() {
    const { kind, name } = selected();
    if (kind === "tokenizer") {
      const t = tokenizers.find((x) => x.name === name);
      return t ? t.kind : "";
    }
    const t = tokenizers.find((x) => x.models.includes(name));
    return t ? t.kind : "";
  }

  function fillPicker() {
    el.target.textContent = "";
    const groupT = document.createElement("optgroup");
    groupT.label = "Tokenizers";
    for (const t of tokenizers) {
      const aliases = t.aliases.length ? " (" + t.aliases.join(", ") + ")" : "";
      const label = t.name + aliases + " · " + numberFmt.format(t.vocab_size) + "-token vocabulary";
      groupT.append(new Option(label, "tokenizer:" + t.name));
    }
    el.target.append(groupT);
    const models = [];
    for (const t of tokenizers) for (const m of t.models) models.push([m, t.name]);
    models.sort((a, b) => a[0].localeCompare(b[0]));
    if (models.length) {
      const groupM = document.createElement("optgroup");
      groupM.label = "Models (context window and cost)";
      for (const [m, t] of models) groupM.append(new Option(m + " → " + t, "model:" + m));
      el.target.append(groupM);
    }
    const preferred = tokenizers.find((t) => t.name === "cl100k_base") || tokenizers[0];
    if (preferred) el.target.value = "tokenizer:" + preferred.name;
    el.target.disabled = false;
  }

  // ------------------------------------------------------------------ drawing tokens

  function bytesOf(piece) {
    if (piece.text !== undefined && piece.text !== null) return utf8.encode(piece.text);
    const bin = atob(piece.bytes || "");
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  const hex = (bytes) => Array.from(bytes, (b) => b.toString(16).toUpperCase().padStart(2, "0")).join(" ");

  // Append `text` to `parent` with whitespace made visible: spaces, tabs and newlines get a glyph (newlines also
  // keep their line break).
  function appendVisible(parent, text, spaceGlyph) {
    let run = "";
    const flush = () => { if (run) { parent.append(run); run = ""; } };
    const glyph = (g, keep) => {
      flush();
      const s = document.createElement("span");
      s.className = "ws";
      s.textContent = g;
      parent.append(s);
      if (keep) parent.append(keep);
    };
    for (const ch of text) {
      if (ch === " ") glyph(spaceGlyph);
      else if (ch === "\n") glyph("⏎", "\n");
      else if (ch === "\t") glyph("→");
      else if (ch === "\r") glyph("␍");
      else run += ch;
    }
    flush();
  }

  function tokenElement(i, id, piece, kind, spaceGlyph) {
    const span = document.createElement("span");
    span.className = "tok c" + (i % 8) + (kind ? " " + kind : "");
    span.dataset.testid = "token";
    span.dataset.id = String(id);
    span.dataset.index = String(i);
    span.setAttribute("role", "listitem");
    span.tabIndex = i === 0 ? 0 : -1;
    if (kind === "partial") span.textContent = hex(bytesOf(piece));
    else appendVisible(span, piece.text || "", spaceGlyph);
    return span;
  }

  // Draw `result` (ids, tokens, offsets from /encode) over `text`. Tokens are grouped where their character spans
  // overlap (several tokens sharing one character: partial UTF-8); such a group shows its characters once,
  // followed by each token. Zero-width spans are special tokens (framing tokens of a chat prompt, later).
  function drawTokens(container, text, result, spaceGlyph) {
    const chars = Array.from(text);
    const { ids, tokens, offsets } = result;
    const n = Math.min(ids.length, MAX_DRAWN);
    const frag = document.createDocumentFragment();
    const meta = [];
    let pos = 0;
    let i = 0;
    while (i < n) {
      let [a, b] = offsets[i];
      if (a > pos) { appendVisible(frag, chars.slice(pos, a).join(""), spaceGlyph); }
      let j = i + 1;
      if (a < b) while (j < n && offsets[j][0] < b && offsets[j][1] > offsets[j][0]) { b = Math.max(b, offsets[j][1]); j++; }
      const group = j - i > 1 ? document.createElement("span") : null;
      if (group) {
        group.className = "cluster";
        const shown = document.createElement("span");
        shown.className = "cluster-text";
        appendVisible(shown, chars.slice(a, b).join(""), spaceGlyph);
        group.append(shown);
      }
      for (let k = i; k < j; k++) {
        const piece = tokens[k];
        const [s, e] = offsets[k];
        const kind = s === e && text.length > 0 ? "special" : (piece.text === undefined || piece.text === null ? "partial" : "");
        meta[k] = { id: ids[k], piece, span: [s, e], kind };
        (group || frag).append(tokenElement(k, ids[k], piece, kind, spaceGlyph));
      }
      if (group) frag.append(group);
      pos = Math.max(pos, b);
      i = j;
    }
    if (n < ids.length) {
      const more = document.createElement("p");
      more.className = "muted";
      more.textContent = "… " + numberFmt.format(ids.length - n) + " more tokens not drawn";
      frag.append(more);
    }
    hideTooltip(null);
    container.textContent = "";
    container.append(frag);
    container._meta = meta;
  }

  // ------------------------------------------------------------------ tooltip (hover and focus)

  function showTooltip(target) {
    const meta = el.tokens._meta && el.tokens._meta[Number(target.dataset.index)];
    if (!meta) return;
    const bytes = bytesOf(meta.piece);
    const rows = [
      ["id", String(meta.id)],
      ["bytes", hex(bytes) + " (" + bytes.length + ")"],
      ["token", meta.kind === "partial" ? "not valid UTF-8 on its own (part of a character)" : JSON.stringify(meta.piece.text)],
      ["chars", "[" + meta.span[0] + ", " + meta.span[1] + ")"],
    ];
    if (meta.kind === "special") rows.push(["kind", "special token"]);
    const dl = document.createElement("dl");
    for (const [k, v] of rows) {
      const dt = document.createElement("dt");
      dt.textContent = k;
      const dd = document.createElement("dd");
      dd.textContent = v;
      dd.dataset.field = k;
      dl.append(dt, dd);
    }
    el.tooltip.textContent = "";
    el.tooltip.append(dl);
    el.tooltip.hidden = false;
    const r = target.getBoundingClientRect();
    const width = el.tooltip.offsetWidth;
    const left = Math.max(4, Math.min(window.scrollX + r.left, window.scrollX + document.documentElement.clientWidth - width - 4));
    el.tooltip.style.left = left + "px";
    el.tooltip.style.top = window.scrollY + r.bottom + 6 + "px";
    target.setAttribute("aria-describedby", "tooltip");
  }

  function hideTooltip(target) {
    el.tooltip.hidden = true;
    if (target) target.removeAttribute("aria-describedby");
  }

  const tokenOf = (node) => (node && node.closest ? node.closest('[data-testid="token"]') : null);

  el.tokens.addEventListener("mouseover", (e) => { const t = tokenOf(e.target); if (t) showTooltip(t); });
  el.tokens.addEventListener("mouseout", (e) => { const t = tokenOf(e.target); if (t) hideTooltip(t); });
  el.tokens.addEventListener("focusin", (e) => { const t = tokenOf(e.target); if (t) showTooltip(t); });
  el.tokens.addEventListener("focusout", (e) => { const t = tokenOf(e.target); if (t) hideTooltip(t); });
  el.tokens.addEventListener("keydown", (e) => {
    const current = tokenOf(e.target);
    if (!current) return;
    const all = el.tokens.querySelectorAll('[data-testid="token"]');
    const i = Number(current.dataset.index);
    const next = { ArrowRight: i + 1, ArrowDown: i + 1, ArrowLeft: i - 1, ArrowUp: i - 1, Home: 0, End: all.length - 1 }[e.key];
    if (e.key === "Escape") { hideTooltip(current); return; }
    if (next === undefined || next < 0 || next >= all.length) return;
    e.preventDefault();
    current.tabIndex = -1;
    all[next].tabIndex = 0;
    all[next].focus();
  });

  // ------------------------------------------------------------------ the tokens view

  let encodeAbort = null;

  function setStatus(message, isError) {
    el.status.textContent = message || "";
    el.status.classList.toggle("error", Boolean(isError));
  }

  function showModel(model, count) {
    const boxes = document.querySelectorAll(".model-only");
    for (const b of boxes) b.hidden = !model;
    if (!model) return;
    if (model.context_window) {
      const share = count / model.context_window;
      el.context.textContent = numberFmt.format(count) + " / " + numberFmt.format(model.context_window) +
        " (" + (share * 100).toFixed(share < 0.001 ? 3 : 1) + "%)";
      el.bar.style.width = Math.min(100, share * 100) + "%";
      el.bar.classList.toggle("over", model.fits === false);
    } else {
      el.context.textContent = "unknown";
      el.bar.style.width = "0";
    }
    // Amounts arrive as exact decimal strings (docs/pricing.md): shown as sent, never through a float.
    const price = model.price;
    if (price) {
      el.cost.textContent = "$" + model.estimated_input_cost;
      el.cost.title = model.input_price_per_million + " USD per million input tokens (" + model.price_source +
        "; " + model.price_as_of + ")";
      const parts = Object.entries(price.breakdown).map(([kind, amount]) => kind.replace(/_/g, " ") + " $" + amount);
      const reserved = model.output_tokens_reserved;
      el.breakdown.textContent = parts.join(" · ") + (price.output_priced ? " · total $" + price.total +
        " (" + numberFmt.format(reserved) + " output tokens reserved)" : " (no output reserved)");
      el.breakdown.title = price.provider + " " + price.model + ", " + price.data_version +
        (price.tier ? "; " + price.tier.reason : "");
    } else {
      el.cost.textContent = "no price";
      el.cost.title = model.price_unavailable || "";
      el.breakdown.textContent = model.price_unavailable || "–";
      el.breakdown.title = "";
    }
  }

  function showStats(text, count) {
    const chars = Array.from(text).length;
    const bytes = utf8.encode(text).length;
    el.count.textContent = numberFmt.format(count);
    el.chars.textContent = numberFmt.format(chars);
    el.bytes.textContent = numberFmt.format(bytes);
    el.bpt.textContent = count ? (bytes / count).toFixed(2) : "–";
  }

  async function updateTokens() {
    const text = el.text.value;
    if (encodeAbort) encodeAbort.abort();
    if (!text) {
      el.tokens.textContent = "";
      showStats("", 0);
      showModel(null, 0);
      setStatus("");
      return;
    }
    const abort = (encodeAbort = new AbortController());
    setStatus("tokenizing…");
    try {
      const result = await api("encode", { ...targetBody(), text, return_tokens: true, return_offsets: true }, abort.signal);
      if (abort.signal.aborted) return;
      const spaceGlyph = /sentencepiece|unigram|spm/i.test(selectedKind()) ? "▁" : "·";
      drawTokens(el.tokens, text, result, spaceGlyph);
      showStats(text, result.count);
      showModel(result.model || null, result.count);
      setStatus(result.tokenizer + (result.model ? " (model " + result.model.name + ")" : ""));
    } catch (err) {
      if (isAbort(err)) return;
      setStatus(err.message, true);
    }
  }

  // ------------------------------------------------------------------ the compare view

  let compareAbort = null;

  async function updateCompare() {
    if ($("panel-compare").hidden) return;
    const text = el.text.value;
    if (compareAbort) compareAbort.abort();
    const abort = (compareAbort = new AbortController());
    const chars = Array.from(text).length;
    try {
      const counts = await Promise.all(tokenizers.map((t) =>
        text ? api("count", { tokenizer: t.name, text }, abort.signal).then((r) => r.count) : Promise.resolve(0)));
      if (abort.signal.aborted) return;
      const max = Math.max(1, ...counts);
      const min = Math.min(...counts);
      el.compareBody.textContent = "";
      tokenizers.forEach((t, i) => {
        const tr = document.createElement("tr");
        tr.dataset.testid = "compare-row";
        tr.dataset.tokenizer = t.name;
        if (text && counts[i] === min) tr.classList.add("best");
        const cells = [t.name, numberFmt.format(counts[i]), chars ? (counts[i] / chars).toFixed(3) : "–",
          counts[i] ? (chars / counts[i]).toFixed(2) : "–"];
        cells.forEach((v, k) => {
          const td = document.createElement(k === 0 ? "th" : "td");
          if (k === 0) td.scope = "row";
          if (k === 1) td.dataset.testid = "compare-count";
          td.textContent = v;
          tr.append(td);
        });
        const barCell = document.createElement("td");
        barCell.className = "bar-cell";
        const bar = document.createElement("div");
        bar.className = "bar";
        bar.style.width = (100 * counts[i] / max) + "%";
        barCell.append(bar);
        tr.append(barCell);
        el.compareBody.append(tr);
      });
    } catch (err) {
      if (isAbort(err)) return;
      el.compareBody.textContent = "";
      const tr = document.createElement("tr");
      const td = document.createElement("td");
      td.colSpan = 5;
      td.className = "error";
      td.textContent = err.message;
      tr.append(td);
      el.compareBody.append(tr);
    }
  }

  // ------------------------------------------------------------------ decode box

  let decodeAbort = null;

  async function updateDecode() {
    const raw = el.decodeIds.value.trim();
    if (decodeAbort) decodeAbort.abort();
    el.decodeOut.classList.remove("error");
    if (!raw) { el.decodeOut.textContent = ""; return; }
    const parts = raw.replace(/^\[|\]$/g, "").split(/[\s,]+/).filter(Boolean);
    if (!parts.every((p) => /^\d+$/.test(p))) {
      el.decodeOut.classList.add("error");
      el.decodeOut.textContent = "ids are non-negative integers, separated by commas or spaces";
      return;
    }
    const abort = (decodeAbort = new AbortController());
    try {
      const result = await api("decode", { ...targetBody(), ids: parts.map(Number) }, abort.signal);
      if (abort.signal.aborted) return;
      el.decodeOut.textContent = result.text;
    } catch (err) {
      if (isAbort(err)) return;
      el.decodeOut.classList.add("error");
      el.decodeOut.textContent = err.message;
    }
  }

  // ------------------------------------------------------------------ wiring

  function debounce(fn) {
    let timer = null;
    return () => { clearTimeout(timer); timer = setTimeout(fn, DEBOUNCE_MS); };
  }

  const refreshText = () => { updateTokens(); updateCompare(); };
  const onTextInput = debounce(refreshText);
  el.text.addEventListener("input", onTextInput);
  el.decodeIds.addEventListener("input", debounce(updateDecode));
  el.target.addEventListener("change", () => { refreshText(); updateDecode(); });

  for (const button of document.querySelectorAll("[data-sample]")) {
    button.addEventListener("click", () => { el.text.value = SAMPLES[button.dataset.sample]; refreshText(); });
  }

  const tabs = Array.from(document.querySelectorAll('[role="tab"]'));
  function selectTab(tab) {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute("aria-selected", String(on));
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute("aria-controls")).hidden = !on;
    }
    hideTooltip(null);
    if (tab.id === "tab-compare") updateCompare();
  }
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => selectTab(tab));
    tab.addEventListener("keydown", (e) => {
      const j = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (j === undefined) return;
      e.preventDefault();
      const next = tabs[(j + tabs.length) % tabs.length];
      selectTab(next);
      next.focus();
    });
  });

  el.auth.addEventListener("cancel", (e) => e.preventDefault()); // nothing works without the token
  el.forget.addEventListener("click", () => {
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    el.forget.hidden = true;
    askToken("Token forgotten. Enter a bearer token to go on.").then(refreshText);
  });
  el.forget.hidden = !token;

  async function start() {
    for (;;) {
      try {
        tokenizers = (await api("tokenizers")).tokenizers;
        break;
      } catch (err) {
        setStatus("cannot list tokenizers: " + err.message + " (retrying)", true);
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
    fillPicker();
    setStatus("");
    document.body.dataset.ready = "true";
    if (el.text.value) refreshText();
  }

  start();
})();
