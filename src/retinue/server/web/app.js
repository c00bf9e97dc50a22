// Retinue's web page: conversations with the main agent, and the live tree of its
// sub-agents. Plain DOM, no framework. Every piece of data reaches the page through
// textContent (never innerHTML), and every API call carries the token, which is kept in
// sessionStorage (this tab only).
"use strict";

(() => {
  const TOKEN_KEY = "retinue.token";
  const CURRENT_KEY = "retinue.conversation";
  const SHOW_API_KEY = "retinue.showApi";
  const API_PREFIX = "oai-"; // conversations the OpenAI-compatible endpoint started
  const ENDED = new Set(["ended", "closed"]);
  const MAX_BUFFER = 4_000_000; // characters of one unfinished SSE frame
  const POLL_MS = 1500;
  const MEDIA_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"];
  const MAX_FILE_BYTES = 20 * 2 ** 20; // the server's limit on one image or PDF
  const MAX_FILES = 20;

  const $ = (id) => document.getElementById(id);

  const state = {
    token: sessionStorage.getItem(TOKEN_KEY) || "",
    conversations: [], // what GET /v1/conversations says
    local: new Set(), // conversations started here that the server does not list yet
    current: null,
    transcripts: new Map(), // conversation id -> [{role, text, meta, error, pending}]
    trees: new Map(), // conversation id -> Map(agent id -> node)
    tasks: new Map(), // conversation id -> its tree's shared task list (TaskCreate), as listed
    approvals: new Map(), // conversation id -> Map(request id -> a call waiting for a yes)
    turn: null, // {cid, controller, reply}: the turn this tab streams
    attachments: [], // files to send with the next message: {name, media_type, data, url}
    historyOf: null, // the agent whose history is open
    historyKey: null, // its state and turns when its history was last shown
    showApi: sessionStorage.getItem(SHOW_API_KEY) === "1", // list the OpenAI endpoint's chats
    ticker: null,
    drawing: false,
  };

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  // -- small helpers -------------------------------------------------------------------

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) Object.assign(node, props);
    node.append(...children);
    return node;
  }

  function clip(text, limit) {
    const s = String(text ?? "");
    return s.length > limit ? `${s.slice(0, limit)}…` : s;
  }

  const agentId = (cid) => `conv-${cid}`;
  const fromApi = (cid) => cid.startsWith(API_PREFIX);
  const sessionPath = (sid) => sid.split("/").map(encodeURIComponent).join("/");
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

  function newId() {
    const stamp = new Date().toISOString().slice(0, 19).replace(/[-:]/g, "").replace("T", "-");
    return `chat-${stamp}-${Math.random().toString(36).slice(2, 6)}`;
  }

  // -- the API -------------------------------------------------------------------------

  function headers(json) {
    const out = { Authorization: `Bearer ${state.token}` };
    if (json) out["Content-Type"] = "application/json";
    return out;
  }

  async function failure(response) {
    let message = response.statusText || `HTTP ${response.status}`;
    try {
      const data = await response.json();
      if (data && typeof data.error === "string") message = data.error;
    } catch (_) {
      // not JSON: keep the status text
    }
    return new ApiError(response.status, message);
  }

  async function call(path, init) {
    try {
      return await fetch(path, init);
    } catch (err) {
      if (init.signal && init.signal.aborted) throw err;
      throw new ApiError(0, "the server cannot be reached");
    }
  }

  async function api(method, path, body) {
    const init = { method, headers: headers(body !== undefined) };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await call(path, init);
    if (!response.ok) throw await failure(response);
    return response.json();
  }

  // -- errors and signing in -----------------------------------------------------------

  function explain(status, message) {
    if (status === 0) return sentence(message); // the page's own words ("the server cannot be reached")
    if (status === 401) return "The server refused the token.";
    if (status === 429) return `The server is busy: ${message}`;
    if (status === 502) return `The model is unreachable: ${message}`;
    if (/budget/i.test(message)) return `Budget reached: ${message}`;
    return `${message} (HTTP ${status})`;
  }

  function sentence(text) {
    const s = String(text || "something went wrong").trim();
    return `${s.charAt(0).toUpperCase()}${s.slice(1)}${/[.!?]$/.test(s) ? "" : "."}`;
  }

  function showError(err) {
    if (!(err instanceof ApiError)) err = new ApiError(0, String(err && err.message));
    if (err.status === 401) {
      signOut("The server refused this token: paste the right one.");
      return;
    }
    $("error-text").textContent = explain(err.status, err.message);
    $("error").dataset.status = String(err.status);
    $("error").hidden = false;
  }

  function clearError() {
    $("error").hidden = true;
  }

  async function signIn(token) {
    state.token = token;
    try {
      await loadConversations();
    } catch (err) {
      if (err.status === 401) signOut("This token was refused.");
      else showError(err);
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    $("login").hidden = true;
    $("app").hidden = false;
    $("logout").hidden = false;
    clearError();
    health();
    const remembered = sessionStorage.getItem(CURRENT_KEY);
    const listed = state.conversations.map((c) => c.id);
    const shown = listed.filter((id) => state.showApi || !fromApi(id));
    const first = listed.includes(remembered) ? remembered : shown[0];
    await select(first || newId());
    if (state.ticker === null) state.ticker = setInterval(tick, POLL_MS);
  }

  function signOut(message) {
    if (state.turn) state.turn.controller.abort();
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = "";
    $("app").hidden = true;
    $("logout").hidden = true;
    $("error").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("token").value = "";
    $("token").focus();
  }

  async function health() {
    try {
      const data = await (await fetch("/healthz")).json();
      $("model").textContent = `model ${data.model}`;
    } catch (_) {
      $("model").textContent = "";
    }
  }

  // -- conversations -------------------------------------------------------------------

  async function loadConversations() {
    const data = await api("GET", "/v1/conversations");
    const was = state.conversations.find((c) => c.id === state.current);
    state.conversations = data.conversations;
    const now = state.conversations.find((c) => c.id === state.current);
    if (was && was.running && now && !now.running && !state.turn) loadTranscript(now.id); // another client's turn ended
    for (const c of state.conversations) state.local.delete(c.id);
    drawConversations();
  }

  function drawConversations() {
    const rows = [...state.conversations];
    for (const id of state.local) rows.push({ id, messages: 0, running: false, fresh: true });
    // The OpenAI-compatible endpoint makes a conversation of every client's chat (each
    // one-shot call one): hidden unless asked for, marked "API" when shown.
    const hidden = rows.filter((c) => fromApi(c.id) && !state.showApi && c.id !== state.current);
    $("show-api").checked = state.showApi;
    $("show-api-count").textContent = hidden.length ? ` (${hidden.length} hidden)` : "";
    $("show-api").parentElement.hidden = !rows.some((c) => fromApi(c.id));
    const visible = rows.filter((c) => !hidden.includes(c));
    const items = visible.map((c) => {
      const facts = c.fresh ? ["new"] : [plural(c.messages, "message")];
      if (fromApi(c.id)) facts.unshift("API");
      if (c.running) facts.push("running");
      if (c.question) facts.push("asks you");
      const button = el(
        "button",
        { type: "button", className: "link" },
        el("span", { className: "name", textContent: c.title || c.id }),
        el("span", { className: "muted small", textContent: facts.join(" · ") }),
      );
      button.dataset.cid = c.id;
      button.dataset.source = fromApi(c.id) ? "api" : "chat";
      button.title = c.id;
      button.addEventListener("click", () => select(c.id));
      return el("li", { className: c.id === state.current ? "current" : "" }, button);
    });
    $("conversation-list").replaceChildren(...items);
    const current = rows.find((c) => c.id === state.current);
    $("chat-title").textContent = (current && current.title) || state.current || "";
    $("chat-title").dataset.cid = state.current || "";
    $("delete-conversation").hidden = !state.conversations.some((c) => c.id === state.current);
  }

  function transcriptOf(cid) {
    if (!state.transcripts.has(cid)) state.transcripts.set(cid, []);
    return state.transcripts.get(cid);
  }

  function treeOf(cid) {
    if (!state.trees.has(cid)) state.trees.set(cid, new Map());
    return state.trees.get(cid);
  }

  async function select(cid) {
    state.current = cid;
    sessionStorage.setItem(CURRENT_KEY, cid);
    const listed = state.conversations.some((c) => c.id === cid);
    for (const id of state.local) {
      if (!(state.transcripts.get(id) || []).length) state.local.delete(id); // never used
    }
    if (!listed) state.local.add(cid);
    closeHistory();
    drawConversations();
    drawMessages();
    drawTree();
    drawApprovals();
    if (listed && !(state.turn && state.turn.cid === cid)) await loadTranscript(cid);
    if (listed) await refreshSessions();
  }

  // A tool call in the chat (live or reloaded alike): one collapsed line, its arguments
  // and result inside.
  function toolItem(callId, name, args) {
    return { role: "tool", callId, name: String(name || "?"), args: String(args ?? ""), result: null, error: false };
  }

  function fromMessages(messages) {
    const out = [];
    const calls = new Map();
    for (const m of messages) {
      if (m.role === "user") out.push({ role: "user", text: m.content, parts: (m.parts || []).map(shownPart) });
      if (m.role === "tool" && calls.has(m.tool_call_id)) {
        const parts = (m.parts || []).map(shownPart); // images and PDFs the tool returned
        Object.assign(calls.get(m.tool_call_id), { result: m.content, error: Boolean(m.is_error), parts });
      }
      if (m.role !== "assistant") continue;
      if (m.content) out.push({ role: "assistant", text: m.content });
      for (const t of m.tool_calls || []) {
        const item = toolItem(t.id, t.name, t.arguments);
        calls.set(t.id, item);
        out.push(item);
      }
    }
    return out;
  }

  function parsed(json) {
    try {
      const value = JSON.parse(json);
      return value && typeof value === "object" ? value : {};
    } catch (_) {
      return {};
    }
  }

  // After a reload or a restart the events are gone: the tree is drawn again from the
  // conversation's own SubAgent calls and their results, once per page load, unless this tab
  // saw its events. What /v1/sessions said of a live session is kept (it comes next anyway);
  // the others show as ended. Sub-agents' own sub-agents are not in this history.
  function treeFromHistory(cid, messages) {
    const tree = treeOf(cid);
    if (tree.seen || tree.derived) return;
    tree.derived = true;
    const main = agentId(cid);
    const made = new Set(); // the nodes drawn from the history (no token count: not stored)
    const draw = (id, fields) => {
      if (!tree.has(id)) made.add(id);
      const n = node(tree, id, main === id ? null : main);
      if (made.has(id)) Object.assign(n, fields, { tokens: null });
      return made.has(id) ? n : null;
    };
    const top = draw(main, { role: "main", state: "idle", session: false });
    if (top) top.turns = messages.filter((m) => m.role === "user").length;
    const calls = new Map();
    let oneShots = 0;
    for (const m of messages) {
      if (m.role === "tool" && calls.get(m.tool_call_id)) {
        const n = calls.get(m.tool_call_id);
        const reply = String(m.content || "").replace(/\n\n\[[^\]]*\]\s*$/, ""); // less the note to the parent
        if (m.is_error) n.problem = problem("SubAgent", reply);
        else if (reply) n.lastReply = clip(reply, 300);
      }
      if (m.role !== "assistant") continue;
      for (const t of m.tool_calls || []) {
        const args = parsed(t.arguments);
        if (typeof args.role !== "string" || !args.role) continue;
        const where = `${main}/${args.role}${args.instance ? `:${args.instance}` : ""}`;
        if (t.name === "UnloadSubAgent" && made.has(where)) tree.get(where).state = "ended";
        if (t.name !== "SubAgent") continue;
        const kept = Boolean(args.interactive || args.background || args.steer);
        const n = draw(kept ? where : `${main}/${args.role}#${++oneShots}`, {
          role: args.role,
          session: kept,
          state: kept ? "ended" : "done",
        });
        if (n && !args.steer) n.turns += 1;
        calls.set(t.id, n);
      }
    }
  }

  async function loadTranscript(cid) {
    try {
      const data = await api("GET", `/v1/conversations/${encodeURIComponent(cid)}`);
      state.transcripts.set(cid, fromMessages(data.messages || []));
      treeFromHistory(cid, data.messages || []);
      setApprovals(cid, data.approvals || []);
      if (data.running) transcriptOf(cid).push({ role: "note", text: "A turn is running…" });
    } catch (err) {
      if (err.status !== 404) return showError(err);
      if (!transcriptOf(cid).length) {
        transcriptOf(cid).push({ role: "note", text: "The server keeps no history of this conversation." });
      }
    }
    if (cid === state.current) drawMessages();
  }

  async function deleteConversation() {
    const cid = state.current;
    if (!cid || !window.confirm(`Delete conversation ${cid} and end its sub-agents?`)) return;
    try {
      await api("DELETE", `/v1/conversations/${encodeURIComponent(cid)}`);
    } catch (err) {
      if (err.status !== 404) return showError(err);
    }
    state.transcripts.delete(cid);
    state.trees.delete(cid);
    state.local.delete(cid);
    await loadConversations().catch(showError);
    await select(state.conversations.length ? state.conversations[0].id : newId());
  }

  // -- the chat ------------------------------------------------------------------------

  function toolBubble(m) {
    const summary = el(
      "summary",
      null,
      el("span", { className: "tool-name", textContent: `→ ${m.name}` }),
      el("span", { className: "tool-args muted", textContent: ` ${clip(m.args, 120)}` }),
    );
    const box = el("details", { className: `msg msg-tool${m.error ? " failed" : ""}` }, summary);
    box.append(el("pre", { className: "tool-detail", textContent: clip(m.args, 4000) }));
    if (m.result !== null) {
      box.append(el("pre", { className: `tool-detail result${m.error ? " bad" : ""}`, textContent: clip(m.result, 4000) }));
    }
    if (m.parts && m.parts.length) box.append(thumbs(m.parts));
    box.dataset.tool = m.name;
    box.open = Boolean(m.open); // collapsed unless the user opened it (kept across redraws)
    box.addEventListener("toggle", () => {
      m.open = box.open;
    });
    return box;
  }

  // -- images and PDFs ------------------------------------------------------------------

  function shownPart(p) {
    // a stored part (base64 data, or a URL the page does not load) as the page shows it
    const url = p.data ? `data:${p.media_type};base64,${p.data}` : "";
    return { name: p.name || p.url || p.type, media_type: p.media_type, url };
  }

  function thumb(p) {
    const item = el("li", { title: `${p.name} (${p.media_type})` });
    if (p.url && p.media_type.startsWith("image/")) {
      item.append(el("img", { src: p.url, alt: p.name }));
    } else {
      item.append(el("span", { textContent: `${p.media_type === "application/pdf" ? "PDF" : "file"} · ${clip(p.name, 40)}` }));
    }
    return item;
  }

  function thumbs(parts) {
    return el("ul", { className: "thumbs" }, ...parts.map(thumb));
  }

  function readFile(file) {
    return new Promise((resolve, reject) => {
      if (!MEDIA_TYPES.includes(file.type)) {
        reject(new Error(`Not sent: ${file.name} (images, PNG, JPEG, GIF or WebP, and PDFs only)`));
      } else if (file.size > MAX_FILE_BYTES) {
        reject(new Error(`Not sent: ${file.name} (over ${MAX_FILE_BYTES / 2 ** 20} MB)`));
      } else {
        const reader = new FileReader();
        reader.onload = () => {
          const url = String(reader.result);
          resolve({ name: file.name, media_type: file.type, data: url.slice(url.indexOf(",") + 1), url });
        };
        reader.onerror = () => reject(new Error(`${file.name}: could not be read`));
        reader.readAsDataURL(file);
      }
    });
  }

  async function attach(files) {
    for (const file of files) {
      if (state.attachments.length >= MAX_FILES) {
        showError(new Error(`At most ${MAX_FILES} files in one message.`));
        break;
      }
      try {
        state.attachments.push(await readFile(file));
      } catch (err) {
        showError(err);
      }
    }
    drawAttachments();
  }

  function drawAttachments() {
    const list = $("attachments");
    list.replaceChildren(
      ...state.attachments.map((p, i) => {
        const item = thumb(p);
        const remove = el("button", { type: "button", className: "quiet", textContent: "×", title: `Remove ${p.name}` });
        remove.setAttribute("aria-label", `Remove ${p.name}`);
        remove.addEventListener("click", () => {
          state.attachments.splice(i, 1);
          drawAttachments();
        });
        item.append(remove);
        return item;
      }),
    );
    list.hidden = state.attachments.length === 0;
  }

  function wireFiles() {
    $("attach").addEventListener("click", () => $("file").click());
    $("file").addEventListener("change", () => {
      attach([...$("file").files]);
      $("file").value = "";
    });
    const composer = $("composer");
    composer.addEventListener("dragover", (e) => {
      if (![...(e.dataTransfer?.types || [])].includes("Files")) return;
      e.preventDefault();
      composer.classList.add("dropping");
    });
    composer.addEventListener("dragleave", () => composer.classList.remove("dropping"));
    $("input").addEventListener("paste", (e) => {
      const files = [...(e.clipboardData?.files || [])];
      if (!files.length) return; // text: pasted as usual
      e.preventDefault();
      attach(files);
    });
    composer.addEventListener("drop", (e) => {
      composer.classList.remove("dropping");
      if (!e.dataTransfer?.files.length) return;
      e.preventDefault();
      attach([...e.dataTransfer.files]);
    });
  }

  function bubble(m) {
    if (m.role === "tool") return toolBubble(m);
    const who = { user: "You", assistant: "Agent", note: "" }[m.role] ?? m.role;
    const text = el("div", { className: "text", textContent: m.text || (m.pending ? "…" : "") });
    const box = el("div", { className: `msg msg-${m.role}` });
    if (who) box.append(el("div", { className: "who", textContent: who }));
    box.append(text);
    if (m.parts && m.parts.length) box.append(thumbs(m.parts));
    if (m.meta) box.append(el("div", { className: "meta muted", textContent: m.meta }));
    if (m.error) box.append(el("div", { className: "meta bad", textContent: m.error }));
    if (m.pending) box.classList.add("pending");
    m.el = text;
    return box;
  }

  function drawMessages() {
    const box = $("messages");
    box.replaceChildren(...transcriptOf(state.current).map(bubble));
    box.scrollTop = box.scrollHeight;
  }

  function redrawIfCurrent(cid) {
    if (cid === state.current) drawMessages();
  }

  function setBusy(busy) {
    $("send").disabled = busy;
    $("stop").hidden = !busy;
    $("turn-state").textContent = busy ? "working…" : "";
  }

  function describe(result) {
    const usage = result.usage || {};
    const facts = [plural((usage.input_tokens || 0) + (usage.output_tokens || 0), "token")];
    if (result.tools_used && result.tools_used.length) facts.push(`tools: ${result.tools_used.join(", ")}`);
    const why = {
      asking: "the agent asks you: your next message answers",
      max_iterations: "stopped at the step limit",
      interrupted: "interrupted",
    }[result.stop_reason];
    if (why) facts.push(why);
    return facts.join(" · ");
  }

  async function send(text, files = []) {
    const cid = state.current;
    const transcript = transcriptOf(cid);
    const reply = { role: "assistant", text: "", pending: true };
    transcript.push({ role: "user", text, parts: files }, reply);
    const parts = files.map((p) => ({
      type: p.media_type === "application/pdf" ? "document" : "image",
      media_type: p.media_type,
      data: p.data,
      name: p.name,
    }));
    const controller = new AbortController();
    state.turn = { cid, controller, reply };
    setBusy(true);
    clearError();
    drawMessages();
    try {
      const response = await call(`/v1/conversations/${encodeURIComponent(cid)}/messages`, {
        method: "POST",
        headers: { ...headers(true), Accept: "text/event-stream" },
        body: JSON.stringify({ content: text, keep_sessions: true, parts }),
        signal: controller.signal,
      });
      if (!response.ok) throw await failure(response);
      setTimeout(() => loadConversations().catch(() => {}), 300);
      await readEvents(response, (kind, data) => onEvent(cid, reply, kind, data));
      if (!reply.done) reply.error = "The stream ended before the turn did.";
    } catch (err) {
      if (controller.signal.aborted) {
        reply.meta = "Stopped: the turn was cancelled.";
      } else {
        reply.error = explain(err.status ?? 0, err.message);
        showError(err);
        if (files.length && !reply.text && !state.attachments.length) {
          state.attachments = files; // refused: the files stay in the composer, to send again
          drawAttachments();
        }
      }
    } finally {
      settle(cid, controller.signal.aborted ? "stopped" : reply.error ? "failed" : "idle");
      reply.pending = false;
      state.turn = null;
      setBusy(false);
      redrawIfCurrent(cid);
      loadConversations().catch(() => {});
      if (cid === state.current) refreshSessions();
    }
  }

  async function readEvents(response, handle) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const frame = parseFrame(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        if (frame) handle(frame.kind, frame.data);
      }
      if (buffer.length > MAX_BUFFER) throw new ApiError(0, "an event from the server is too large");
    }
  }

  function parseFrame(block) {
    let kind = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith("event:")) kind = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    try {
      return data.length ? { kind, data: JSON.parse(data.join("\n")) } : null;
    } catch (_) {
      return null;
    }
  }

  function onEvent(cid, reply, kind, data) {
    if (kind === "text_delta" && data.agent_id === agentId(cid)) {
      reply.text += data.text;
      if (reply.el && reply.el.isConnected) reply.el.textContent = reply.text;
      const box = $("messages");
      box.scrollTop = box.scrollHeight;
    } else if (kind === "result") {
      reply.done = true;
      reply.text = data.content || reply.text;
      reply.meta = describe(data);
    } else if (kind === "error") {
      reply.done = true;
      reply.error = explain(data.status, data.error);
      showError(new ApiError(data.status, data.error));
    } else if (kind === "approval_requested" || kind === "approval_answered") {
      approvalEvent(cid, kind, data);
    } else {
      if (data.agent_id === agentId(cid)) liveTool(cid, reply, kind, data);
      treeEvent(cid, kind, data);
    }
  }

  // -- approvals: calls (at any depth) that wait for a person's yes or no ---------------

  function approvalsOf(cid) {
    if (!state.approvals.has(cid)) state.approvals.set(cid, new Map());
    return state.approvals.get(cid);
  }

  function setApprovals(cid, list) {
    const pending = approvalsOf(cid);
    const ids = new Set(list.map((a) => a.id));
    for (const id of pending.keys()) if (!ids.has(id)) pending.delete(id);
    for (const a of list) if (!pending.has(a.id)) pending.set(a.id, a);
    if (cid === state.current) drawApprovals();
  }

  function approvalEvent(cid, kind, data) {
    if (typeof data.id !== "string") return;
    if (kind === "approval_requested") approvalsOf(cid).set(data.id, data);
    else approvalsOf(cid).delete(data.id);
    const n = typeof data.agent_id === "string" && treeOf(cid).get(data.agent_id);
    if (n) n.activity = kind === "approval_requested" ? "waits for your approval" : "";
    if (cid === state.current) {
      drawApprovals();
      scheduleTree();
    }
  }

  async function refreshApprovals(cid) {
    try {
      const data = await api("GET", `/v1/conversations/${encodeURIComponent(cid)}/approvals`);
      setApprovals(cid, data.approvals);
    } catch (err) {
      if (err.status !== 404) showError(err);
    }
  }

  function whoAsks(a) {
    if (!a.depth) return "The main agent";
    return `Sub-agent ${a.role} (${a.agent_id || "?"}, depth ${a.depth})`;
  }

  function approvalCard(cid, a) {
    const args = String(a.arguments ?? "");
    const shown = args.length > 160 || args.includes("\n")
      ? el("details", null, el("summary", { textContent: clip(args, 120) }), el("pre", { textContent: args }))
      : el("pre", { textContent: args });
    const reason = el("input", { placeholder: "Why not (optional, for Deny)", maxLength: 2000 });
    const answer = (allow, always) => answerApproval(cid, a.id, { allow, always, message: allow ? "" : reason.value.trim() }, card);
    const button = (text, cls, allow, always) => {
      const b = el("button", { type: "button", className: `small ${cls}`, textContent: text });
      b.addEventListener("click", () => answer(allow, always));
      return b;
    };
    const card = el(
      "div",
      { className: "approval" },
      el("div", { className: "who", textContent: `${whoAsks(a)} wants to run ${a.tool}` }),
      shown,
      el("div", { className: "muted small", textContent: `Why it asks: ${a.reason}` }),
      el("div", { className: "muted small approval-rule", textContent: a.rule ? `Always adds the rule ${a.rule} for this conversation.` : "Always allows this call only (no rule as narrow as it exists)." }),
      el(
        "div",
        { className: "approval-actions" },
        button("Allow", "", true, false),
        button("Always", "quiet", true, true),
        reason,
        button("Deny", "danger", false, false),
      ),
    );
    card.dataset.id = a.id;
    card.dataset.tool = a.tool;
    return card;
  }

  // Stop denies the turn's pending calls first: a main-agent call left waiting would stay
  // stored (it outlives its turn's stream, as through a restart of the service).
  async function stopTurn() {
    const turn = state.turn;
    if (!turn) return;
    const pending = [...approvalsOf(turn.cid).keys()];
    const path = (id) => `/v1/conversations/${encodeURIComponent(turn.cid)}/approvals/${encodeURIComponent(id)}`;
    await Promise.allSettled(pending.map((id) => api("POST", path(id), { allow: false, message: "the user stopped the turn" })));
    turn.controller.abort();
  }

  // Cards still pending keep their element (and what was typed in them).
  function drawApprovals() {
    const box = $("approvals");
    const have = new Map([...box.children].map((c) => [c.dataset.id, c]));
    const pending = [...approvalsOf(state.current).values()];
    box.replaceChildren(...pending.map((a) => have.get(a.id) || approvalCard(state.current, a)));
    box.hidden = !pending.length;
  }

  async function answerApproval(cid, id, body, card) {
    for (const b of card.querySelectorAll("button")) b.disabled = true;
    try {
      await api("POST", `/v1/conversations/${encodeURIComponent(cid)}/approvals/${encodeURIComponent(id)}`, body);
    } catch (err) {
      if (err.status !== 404) { // 404: answered already (elsewhere), or withdrawn
        for (const b of card.querySelectorAll("button")) b.disabled = false;
        return showError(err);
      }
    }
    approvalsOf(cid).delete(id);
    const listed = state.conversations.find((c) => c.id === cid);
    if (listed && !(state.turn && state.turn.cid === cid)) listed.running = true; // followed until it ends
    if (cid === state.current) drawApprovals();
  }

  // The main agent's tool calls join the live chat as they start, as a reloaded chat
  // shows them: what it said before the calls, then the calls, then the rest of its reply.
  function liveTool(cid, reply, kind, data) {
    const transcript = transcriptOf(cid);
    if (kind === "tool_started") {
      const at = transcript.indexOf(reply);
      if (at < 0) return;
      const items = [toolItem(data.call_id, data.name, data.arguments)];
      if (reply.text.trim()) items.unshift({ role: "assistant", text: reply.text });
      reply.text = "";
      transcript.splice(at, 0, ...items);
    } else if (kind === "tool_finished") {
      const item = transcript.find((m) => m.role === "tool" && m.callId === data.call_id && m.result === null);
      if (!item) return;
      item.result = data.preview ?? "";
      item.error = Boolean(data.is_error);
    } else {
      return;
    }
    redrawIfCurrent(cid);
  }

  // -- the sub-agent tree --------------------------------------------------------------

  function node(tree, id, parent) {
    let n = tree.get(id);
    if (!n) {
      const last = id.slice(id.lastIndexOf("/") + 1);
      n = {
        id,
        parent: parent ?? (id.includes("/") ? id.slice(0, id.lastIndexOf("/")) : null),
        role: last.split(":")[0],
        instance: last.includes(":") ? last.slice(last.indexOf(":") + 1) : null,
        state: "running",
        turns: 0,
        tokens: 0,
        lastReply: "",
        activity: "",
        question: null,
        problem: null,
        session: false,
      };
      tree.set(id, n);
    }
    return n;
  }

  function problem(tool, preview) {
    const text = clip(preview, 300);
    return /budget/i.test(text) ? `Budget reached: ${text}` : `${tool} failed: ${text}`;
  }

  const SESSION_STATES = {
    created: "running",
    paused: "idle",
    interrupted: "idle",
    unloaded: "ended",
    asking: "asking",
    answered: "running",
    steered: "running",
  };

  function treeEvent(cid, kind, data) {
    if (typeof data.agent_id !== "string") return;
    const tree = treeOf(cid);
    tree.seen = true; // this tab follows it live: no need to draw it from the history
    const n = node(tree, data.agent_id, data.parent_id);
    if (kind === "run_started") {
      n.state = "running";
      n.started = true; // until its run_finished
      if (data.role) n.role = data.role;
    } else if (kind === "run_finished") {
      n.turns += 1;
      n.started = false;
      n.activity = "";
      const kept = n.session || n.id === agentId(cid);
      n.state = data.stop_reason === "asking" ? "asking" : kept ? "idle" : "done";
      if (n.id === state.historyOf) showHistory(n.id);
    } else if (kind === "model_started") {
      n.activity = "thinking";
    } else if (kind === "model_called") {
      n.tokens = (n.tokens || 0) + (data.input_tokens || 0) + (data.output_tokens || 0);
    } else if (kind === "tool_started") {
      n.activity = `→ ${data.name}`;
    } else if (kind === "tool_finished") {
      n.activity = "";
      n.problem = data.is_error ? problem(data.name, data.preview) : null;
    } else if (kind === "session") {
      n.session = true;
      n.state = SESSION_STATES[data.action] || n.state;
      n.question = data.action === "asking" ? data.question : null;
      setTimeout(refreshSessions, 50);
    } else if (kind === "consolidated") {
      n.activity = data.ok ? "memory consolidated" : "memory not consolidated";
    }
    if (cid === state.current) scheduleTree();
  }

  function settle(cid, outcome) {
    // The turn is over: whatever its events left running (the main agent, one-shot runs)
    // is not, and does nothing any more; a run whose end the stream did not bring (Stop
    // closed it) still counts as a turn. Sessions are told apart by the refresh that follows.
    for (const n of treeOf(cid).values()) {
      if (n.session) continue;
      if (n.state === "running") n.state = outcome;
      if (n.started) n.turns += 1;
      n.started = false;
      n.activity = "";
    }
    if (cid === state.current) scheduleTree();
  }

  async function refreshSessions() {
    const cid = state.current;
    if (!cid || !state.token) return;
    let data;
    try {
      data = await api("GET", `/v1/sessions?team=${encodeURIComponent(agentId(cid))}`);
    } catch (err) {
      return showError(err);
    }
    const lists = data.tasks || {};
    state.tasks.set(cid, Array.isArray(lists[agentId(cid)]) ? lists[agentId(cid)] : []);
    const tree = treeOf(cid);
    const live = new Set();
    for (const info of data.sessions) {
      if (!info.id.startsWith(`${agentId(cid)}/`)) continue;
      live.add(info.id);
      Object.assign(node(tree, info.id, info.parent_id), {
        session: true,
        parent: info.parent_id,
        role: info.role,
        instance: info.instance,
        state: info.state,
        turns: info.turns,
        tokens: info.tokens,
        lastReply: info.last_reply,
        question: info.question,
      });
    }
    for (const n of tree.values()) {
      if (n.session && !live.has(n.id)) {
        n.state = "ended";
        n.question = null;
      }
    }
    if (cid !== state.current) return;
    drawTree();
    syncHistory();
  }

  function scheduleTree() {
    if (state.drawing) return;
    state.drawing = true;
    requestAnimationFrame(() => {
      state.drawing = false;
      drawTree();
    });
  }

  function label(n) {
    if (n.id === agentId(state.current)) return "main agent";
    return n.instance ? `${n.role}:${n.instance}` : n.role;
  }

  function drawNode(n, children) {
    const name = el("button", { type: "button", className: "link node-name", textContent: label(n) });
    name.addEventListener("click", () => openHistory(n.id));
    const badge = el("span", { className: `state state-${n.state.replace(/\W/g, "")}`, textContent: n.state });
    const row = el("div", { className: "node-row" }, name, badge);
    if (n.session && n.state === "running") {
      const stop = el("button", { type: "button", className: "danger small", textContent: "Interrupt" });
      stop.addEventListener("click", () => interrupt(n.id, stop));
      row.append(stop);
    }
    const facts = [plural(n.turns, "turn")];
    if (n.tokens !== null) facts.push(plural(n.tokens, "token"));
    if (n.activity) facts.push(n.activity);
    const li = el("li", { className: "node" }, row, el("div", { className: "node-meta muted", textContent: facts.join(" · ") }));
    li.dataset.id = n.id;
    li.dataset.state = n.state;
    if (n.problem) li.append(el("div", { className: "node-problem", textContent: n.problem }));
    if (n.question) li.append(el("div", { className: "node-question", textContent: `asks: ${clip(n.question, 300)}` }));
    if (n.lastReply) li.append(el("div", { className: "node-reply", textContent: clip(n.lastReply, 300) }));
    const kids = children.get(n.id) || [];
    if (kids.length) li.append(el("ul", { className: "tree" }, ...kids.map((k) => drawNode(k, children))));
    return li;
  }

  function drawTree() {
    const tree = treeOf(state.current);
    const main = agentId(state.current);
    if (tree.size && !tree.has(main)) {
      Object.assign(node(tree, main, null), { role: "main", state: "idle" });
    }
    const children = new Map();
    const roots = [];
    for (const n of tree.values()) {
      if (n.parent && tree.has(n.parent)) {
        if (!children.has(n.parent)) children.set(n.parent, []);
        children.get(n.parent).push(n);
      } else {
        roots.push(n);
      }
    }
    $("tree").replaceChildren(...roots.map((n) => drawNode(n, children)));
    $("tree-empty").hidden = tree.size > 1;
    drawTasks();
  }

  // The tree's shared task list (TaskCreate, TaskUpdate). Model-written: text nodes only.
  function drawTasks() {
    const tasks = state.tasks.get(state.current) || [];
    $("tasks").hidden = !tasks.length;
    const done = tasks.filter((t) => t.status === "completed").length;
    $("tasks-title").textContent = `Task list · ${done} of ${tasks.length} done`;
    const items = tasks.slice(0, 100).map((t) => {
      const facts = [];
      if (t.owner) facts.push(String(t.owner));
      if (Array.isArray(t.blocked_by) && t.blocked_by.length) {
        facts.push(`blocked by ${t.blocked_by.map((i) => `#${i}`).join(", ")}`);
      }
      const badge = el("span", { className: `state state-${String(t.status).replace(/\W/g, "")}`, textContent: String(t.status).replace(/_/g, " ") });
      const row = el("div", { className: "node-row" }, el("span", { textContent: `#${t.id} ${clip(String(t.subject), 200)}` }), badge);
      const li = el("li", { className: "task" }, row);
      if (facts.length) li.append(el("div", { className: "node-meta muted", textContent: clip(facts.join(" · "), 200) }));
      li.dataset.status = String(t.status);
      return li;
    });
    $("task-list").replaceChildren(...items);
  }

  async function interrupt(sid, button) {
    button.disabled = true;
    try {
      const answer = await api("POST", `/v1/sessions/${sessionPath(sid)}/interrupt`, {});
      if (!answer.interrupted) showError(new ApiError(409, `${sid} had no running turn to interrupt`));
    } catch (err) {
      showError(err);
    }
    refreshSessions();
  }

  // -- a session's history -------------------------------------------------------------

  function closeHistory() {
    state.historyOf = null;
    state.historyKey = null;
    $("history").hidden = true;
    $("session-sent").textContent = "";
    offerMessage(null);
  }

  // A session that asks a question takes an answer; a running one takes a steering message.
  const SESSION_MESSAGES = {
    asking: ["answer", "Answer its question"],
    running: ["steer", "Steer its running turn"],
  };

  function offerMessage(sessionState) {
    const offer = SESSION_MESSAGES[sessionState];
    $("session-form").hidden = !offer;
    if (offer) {
      $("session-form").dataset.mode = offer[0];
      $("session-input").placeholder = offer[1];
    }
  }

  async function messageSession(e) {
    e.preventDefault();
    const sid = state.historyOf;
    const mode = $("session-form").dataset.mode;
    const text = $("session-input").value.trim();
    if (!sid || !text) return;
    try {
      await api("POST", `/v1/sessions/${sessionPath(sid)}/${mode}`, { content: text });
      $("session-input").value = "";
      $("session-sent").textContent =
        mode === "answer" ? "Answer sent." : "Steering message sent: the agent sees it before its next model call.";
    } catch (err) {
      showError(err);
    }
    refreshSessions();
  }

  function historyItem(m) {
    const who = m.role === "tool" && m.name ? `tool ${m.name}` : m.role;
    const li = el("li", { className: `h-${m.role}` }, el("div", { className: "who", textContent: who }));
    if (typeof m.reasoning === "number" && m.reasoning > 0) {
      li.append(el("div", { className: "text tool", textContent: `(${plural(m.reasoning, "reasoning part")}, not shown)` }));
    }
    if (m.content) li.append(el("div", { className: "text", textContent: clip(m.content, 4000) }));
    for (const t of m.tool_calls || []) {
      li.append(el("div", { className: "text tool", textContent: `→ ${t.name} ${clip(t.arguments, 400)}` }));
    }
    return li;
  }

  const historyKey = (n) => (n ? `${n.state}|${n.turns}` : "");

  // Open an agent's history: with the tree's states fetched first, so that an ended
  // session is shown as ended without asking the server for it (a 404).
  async function openHistory(id) {
    const n = treeOf(state.current).get(id);
    if (state.historyOf !== id) $("session-sent").textContent = "";
    state.historyOf = id;
    state.historyKey = null;
    $("history").hidden = false;
    $("history-title").textContent = n ? label(n) : id;
    if (n && n.session && !ENDED.has(n.state)) await refreshSessions(); // shows it, if still open
    if (state.historyOf === id && state.historyKey === null) await showHistory(id);
  }

  // The open history, shown again when its agent's state or turns changed since.
  function syncHistory() {
    const id = state.historyOf;
    if (id && historyKey(treeOf(state.current).get(id)) !== state.historyKey) showHistory(id);
  }

  async function showHistory(id) {
    const n = treeOf(state.current).get(id);
    state.historyKey = historyKey(n);
    $("history-list").replaceChildren();
    offerMessage(null);
    const meta = $("history-meta");
    if (id === agentId(state.current)) {
      meta.textContent = "The main agent's conversation is the chat.";
      return;
    }
    if (n && !n.session) {
      meta.textContent = "A one-shot run: it has ended.";
      return keptTranscript(id);
    }
    if (n && ENDED.has(n.state)) {
      meta.textContent = `${id} · ended · ${plural(n.turns, "turn")}. This session has ended: what it learned went into its role's memory.`;
      return keptTranscript(id);
    }
    meta.textContent = "Loading…";
    try {
      const data = await api("GET", `/v1/sessions/${sessionPath(id)}`);
      if (state.historyOf !== id) return;
      const cost = data.cost_usd == null ? "cost unknown" : `$${data.cost_usd.toFixed(4)}`;
      const tokens = data.tokens == null ? "tokens unknown" : plural(data.tokens, "token"); // (Temporal: not counted)
      meta.textContent = `${id} · ${data.state} · ${plural(data.turns, "turn")} · ${tokens} · ${cost}`;
      $("history-list").replaceChildren(...data.history.map(historyItem));
      offerMessage(data.state);
    } catch (err) {
      if (err.status !== 404) return showError(err);
      if (n) n.state = "ended"; // it ended since the last refresh
      if (state.historyOf === id) showHistory(id);
      scheduleTree();
    }
  }

  // -- transcripts of ended sessions (read-only) ----------------------------------------

  // A server that keeps no transcripts (``retinue serve --temporal``) does not serve their
  // routes: a 404 of a list is said calmly where the list would be, not as an error.
  const NOT_KEPT = "No transcript is kept on this deployment.";

  // The latest kept transcript of the ended session ``id``, found through its parent's list
  // (a list is never a 404 where transcripts are served), shown read-only under what the
  // panel already says.
  async function keptTranscript(id) {
    const parent = id.includes("/") ? id.slice(0, id.lastIndexOf("/")) : null;
    if (!parent) return;
    try {
      const data = await api("GET", `/v1/transcripts?parent=${encodeURIComponent(parent)}`);
      const found = (data.transcripts || []).find((t) => t.session_id === id);
      if (found && state.historyOf === id) await showTranscript(found.id, id, "This session has ended. ");
    } catch (err) {
      if (err.status !== 404) return showError(err);
      if (state.historyOf === id) $("history-meta").textContent += ` ${NOT_KEPT}`;
    }
  }

  function transcriptMeta(t) {
    const cost = t.cost_usd == null ? "cost unknown" : `$${t.cost_usd.toFixed(4)}`;
    const tokens = plural(t.input_tokens + t.output_tokens, "token");
    return `${t.session_id} · ended (${t.outcome}) · ${plural(t.turns, "turn")} · ${plural(t.tool_calls, "tool call")} · ${tokens} · ${cost} · transcript ${t.id}, read-only`;
  }

  function childItem(c) {
    const open = el("button", { type: "button", className: "quiet", textContent: `${c.session_id} (${c.role}, ${c.outcome})` });
    open.addEventListener("click", () => openTranscript(c.id));
    return el("li", { className: "h-child" }, el("div", { className: "who", textContent: "sub-agent" }), open);
  }

  // Show transcript ``tid`` in the history panel (``as``: the agent id it is open for).
  async function showTranscript(tid, as, lead = "") {
    const t = await api("GET", `/v1/transcripts/${encodeURIComponent(tid)}`);
    if (state.historyOf !== as) return;
    $("history-meta").textContent = lead + transcriptMeta(t);
    $("history-list").replaceChildren(...(t.entries || []).map(historyItem), ...(t.children || []).map(childItem));
    offerMessage(null);
  }

  async function openTranscript(tid) {
    state.historyOf = tid; // no agent of the tree: a live refresh leaves it as it is
    state.historyKey = "";
    $("session-sent").textContent = "";
    $("history").hidden = false;
    $("history-title").textContent = "Transcript";
    $("history-list").replaceChildren();
    $("history-meta").textContent = "Loading…";
    try {
      await showTranscript(tid, tid);
    } catch (err) {
      showError(err);
    }
  }

  async function searchTranscripts(e) {
    e.preventDefault();
    const q = $("transcript-query").value.trim();
    const list = $("transcript-hits");
    if (!q) return list.replaceChildren();
    try {
      const data = await api("GET", `/v1/transcripts/search?q=${encodeURIComponent(q)}`);
      const hits = data.hits || [];
      list.replaceChildren(...hits.map((h) => {
        const open = el("button", { type: "button", className: "quiet", textContent: `${h.session_id} (${h.role})` });
        open.addEventListener("click", () => openTranscript(h.id));
        return el("li", null, open, el("div", { className: "muted small", textContent: clip(h.snippet, 300) }));
      }));
      if (!hits.length) list.replaceChildren(el("li", { className: "muted small", textContent: "No transcript holds every word of that." }));
    } catch (err) {
      if (err.status !== 404) return showError(err);
      list.replaceChildren(el("li", { className: "muted small", textContent: NOT_KEPT }));
    }
  }

  // -- wiring --------------------------------------------------------------------------

  function tick() {
    if (!state.token || !state.current || document.hidden) return;
    const tree = treeOf(state.current);
    const listed = state.conversations.find((c) => c.id === state.current);
    const asked = approvalsOf(state.current).size > 0;
    const busy = state.turn || asked || (listed && listed.running) || [...tree.values()].some((n) => n.state === "running");
    const open = tree.get(state.historyOf); // a live session's open history follows it
    if (!busy && !(open && open.session && !ENDED.has(open.state))) return;
    // Approvals come as events to the tab that streams the turn; any other tab asks.
    if (!(state.turn && state.turn.cid === state.current) && (asked || (listed && listed.running))) {
      refreshApprovals(state.current);
    }
    refreshSessions();
    if (!state.turn) loadConversations().catch(() => {});
  }

  function wire() {
    $("login-form").addEventListener("submit", (e) => {
      e.preventDefault();
      signIn($("token").value.trim());
    });
    $("logout").addEventListener("click", () => signOut(""));
    $("error-close").addEventListener("click", clearError);
    $("new-conversation").addEventListener("click", () => select(newId()));
    $("show-api").addEventListener("change", () => {
      state.showApi = $("show-api").checked;
      sessionStorage.setItem(SHOW_API_KEY, state.showApi ? "1" : "0");
      drawConversations();
    });
    $("delete-conversation").addEventListener("click", deleteConversation);
    $("refresh").addEventListener("click", refreshSessions);
    $("history-close").addEventListener("click", closeHistory);
    $("session-form").addEventListener("submit", messageSession);
    $("transcript-search").addEventListener("submit", searchTranscripts);
    $("stop").addEventListener("click", stopTurn);
    wireFiles();
    $("composer").addEventListener("submit", (e) => {
      e.preventDefault();
      const files = state.attachments;
      const text = $("input").value.trim() || (files.length ? "(see the attached files)" : "");
      if (!text || state.turn) return;
      $("input").value = "";
      state.attachments = [];
      drawAttachments();
      send(text, files);
    });
    $("input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) {
        e.preventDefault();
        $("composer").requestSubmit();
      }
    });
  }

  function boot() {
    wire();
    const hash = new URLSearchParams(location.hash.slice(1));
    if (hash.get("token")) {
      state.token = hash.get("token");
      history.replaceState(null, "", location.pathname);
    }
    if (state.token) signIn(state.token);
    else signOut("");
  }

  boot();
})();
