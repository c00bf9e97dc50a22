// @a2a-js/sdk's client against Retinue's A2A server: node drive.mjs <url> <phase> [contextId]
// The token comes in A2A_TOKEN. Prints one JSON object: what each step saw.
import { ClientFactory } from "@a2a-js/sdk/client";
import { randomUUID } from "node:crypto";

const [url, phase, contextId] = process.argv.slice(2);
const plainFetch = globalThis.fetch;
globalThis.fetch = (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set("Authorization", `Bearer ${process.env.A2A_TOKEN}`);
  return plainFetch(input, { ...init, headers });
};

const client = await new ClientFactory().createFromUrl(url);
// a Part's content is a oneof, as ts-proto writes it: { $case: "text", value }
const text = (task) => (task.status?.message?.parts || [])
  .map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("\n");
const state = (task) => String(task.status?.state);
const send = async (words, { context = "", task = "", metadata = {}, immediate = false } = {}) => {
  const part = { content: { $case: "text", value: words }, filename: "", mediaType: "" };
  const message = { messageId: randomUUID(), role: 1 /* ROLE_USER */, parts: [part],
                    contextId: context, taskId: task, metadata: undefined, extensions: [],
                    referenceTaskIds: [] };
  const result = await client.sendMessage({
    tenant: "", message, metadata: { role: "helper", ...metadata },
    configuration: immediate ? { returnImmediately: true, acceptedOutputModes: [] } : undefined,
  });
  const id = result.id || result.task?.id || result.taskId;
  return await client.getTask({ tenant: "", id, historyLength: undefined });
};
const seen = (task) => ({ id: task.id, context: task.contextId, state: state(task), text: text(task) });

const out = {};
try {
if (phase === "talk") {
  const first = await send("remember the number 7");
  out.first = seen(first);
  out.second = seen(await send("which number?", { context: first.contextId }));
  const asked = await send("paint the door");
  out.asked = seen(asked);
  out.answered = seen(await send("green", { context: asked.contextId, task: asked.id }));
} else if (phase === "cancel") {
  const running = await send("work slowly", { immediate: true });
  out.running = seen(running);
  const canceled = await client.cancelTask({ tenant: "", id: running.id, metadata: undefined });
  out.canceled = seen(canceled);
  out.after = seen(await client.getTask({ tenant: "", id: running.id, historyLength: undefined }));
} else if (phase === "unload") {
  out.again = seen(await send("go on", { context: contextId }));
  out.ended = seen(await send("bye", { context: contextId, metadata: { unload: true } }));
}
} catch (error) {
  out.error = String(error).slice(0, 500);
}
console.log(JSON.stringify(out));
