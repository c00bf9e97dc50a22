// The TypeScript MCP SDK's client (its experimental tasks: client.experimental.tasks) against
// `retinue mcp serve` at 2025-11-25, with task-augmented SubAgent calls.
//   node tasks.mjs stdio <python> <workspace>      (the environment is the server's)
//   node tasks.mjs http <url> <tokenA> <tokenB>
// Prints one JSON object: what each step saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema, CreateTaskResultSchema, ElicitRequestSchema, TaskStatusNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [mode, ...rest] = process.argv.slice(2);
const text = (r) => (r.content || []).map((c) => c.text || "").join("\n");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const codeOf = async (promise) => {
  try { await promise; return null; } catch (e) { return e.code ?? String(e); }
};

function newClient(seen) {
  const client = new Client({ name: "ts-tasks-test", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} }, tasks: { list: {}, cancel: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    seen.asked.push({ message: request.params.message,
                      related: request.params._meta?.["io.modelcontextprotocol/related-task"] ?? null });
    return { action: "accept", content: { answer: "teal" } };
  });
  client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
    seen.statuses.push({ taskId: n.params.taskId, status: n.params.status });
  });
  return client;
}

// A task-augmented call driven by the SDK to its end: what it yielded.
async function stream(client, args, progress) {
  const out = { types: [], taskId: null, result: null, error: null };
  const options = { task: { ttl: 60000 }, onprogress: (p) => progress.push(p) };
  const call = { name: "SubAgent", arguments: args };
  for await (const m of client.experimental.tasks.callToolStream(call, CallToolResultSchema, options)) {
    out.types.push(m.type === "taskStatus" ? `status:${m.task.status}` : m.type);
    if (m.type === "taskCreated") out.taskId = m.task.taskId;
    if (m.type === "result") out.result = { isError: m.result.isError ?? false, text: text(m.result),
                                            related: m.result._meta ?? null };
    if (m.type === "error") out.error = String(m.error);
  }
  return out;
}

// A task made and left waiting on its question (no tasks/result yet).
async function parked(client, args) {
  const params = { name: "SubAgent", arguments: args, task: { ttl: 60000 } };
  const created = await client.request({ method: "tools/call", params }, CreateTaskResultSchema);
  const taskId = created.task.taskId;
  let task = created.task;
  for (let i = 0; i < 300 && task.status !== "input_required"; i++) {
    await sleep(50);
    task = await client.experimental.tasks.getTask(taskId);
  }
  return { taskId, status: task.status };
}

async function stdio(python, workspace) {
  const seen = { asked: [], statuses: [] };
  const client = newClient(seen);
  const transport = new StdioClientTransport({
    command: python, args: ["-m", "retinue", "mcp", "serve", "--model", "openai:test"],
    cwd: workspace, env: process.env, stderr: "inherit",
  });
  await client.connect(transport);
  const out = { capability: client.getServerCapabilities()?.tasks ?? null };
  const tools = await client.listTools();
  out.execution = Object.fromEntries(tools.tools.map((t) => [t.name, t.execution ?? null]));
  const progress = [];
  out.oneShot = await stream(client, { task: "sum", role: "helper" }, progress);
  out.progress = progress.map((p) => JSON.parse(p.message).kind);
  out.painted = await stream(client, { task: "paint", role: "asker" }, []);
  const listed = await client.experimental.tasks.listTasks();
  const plain = await client.callTool({ name: "SubAgent", arguments: { task: "sum", role: "helper" } });
  out.plain = { isError: plain.isError ?? false, text: text(plain), task: plain.task ?? null };
  out.listed = listed.tasks.map((t) => t.status);
  out.listedAfterPlain = (await client.experimental.tasks.listTasks()).tasks.length;
  // a task cancelled while its sub-agent waits for an answer
  const held = await parked(client, { task: "hold", role: "holder" });
  const cancelled = await client.experimental.tasks.cancelTask(held.taskId);
  const after = await client.experimental.tasks.getTask(held.taskId);
  out.cancel = {
    before: held.status, returned: cancelled.status, after: after.status,
    again: await codeOf(client.experimental.tasks.cancelTask(held.taskId)),
    result: await codeOf(client.experimental.tasks.getTaskResult(held.taskId, CallToolResultSchema)),
    unknown: await codeOf(client.experimental.tasks.getTask("no-such-task")),
  };
  const status = await client.callTool({ name: "SubAgentStatus", arguments: { role: "holder" } });
  out.cancel.session = text(status);
  await sleep(200);  // the last status notifications
  out.asked = seen.asked;
  out.statuses = seen.statuses;
  await client.close();
  return out;
}

async function http(url, tokenA, tokenB) {
  const connect = async (token, seen) => {
    const client = newClient(seen);
    const headers = { Authorization: `Bearer ${token}` };
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
    return client;
  };
  const seenA = { asked: [], statuses: [] };
  const alice = await connect(tokenA, seenA);
  const bob = await connect(tokenB, { asked: [], statuses: [] });
  const held = await parked(alice, { task: "hold", role: "holder" });
  const out = { protocol: alice.transport?.protocolVersion ?? null, before: held.status };
  out.bob = {
    get: await codeOf(bob.experimental.tasks.getTask(held.taskId)),
    cancel: await codeOf(bob.experimental.tasks.cancelTask(held.taskId)),
    result: await codeOf(bob.experimental.tasks.getTaskResult(held.taskId, CallToolResultSchema)),
    listed: (await bob.experimental.tasks.listTasks()).tasks.length,
  };
  out.alice = {
    still: (await alice.experimental.tasks.getTask(held.taskId)).status,
    listed: (await alice.experimental.tasks.listTasks()).tasks.map((t) => t.taskId === held.taskId),
    cancelled: (await alice.experimental.tasks.cancelTask(held.taskId)).status,
  };
  out.painted = await stream(alice, { task: "paint", role: "asker" }, []);
  out.asked = seenA.asked;
  await alice.close();
  await bob.close();
  return out;
}

const out = mode === "http" ? await http(...rest) : await stdio(...rest);
console.log(JSON.stringify(out));
