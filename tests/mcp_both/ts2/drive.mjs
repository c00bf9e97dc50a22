// The TypeScript MCP SDK v2 client (@modelcontextprotocol/client), pinned to protocol
// 2026-07-28, against `retinue mcp serve` on stdio: node drive.mjs <python> <workspace>.
// The environment is the server's. The SDK runs `server/discover` on a short-lived sibling
// process spawned from the same parameters (its stdio negotiation), then talks 2026-07-28 to
// the session's process with no `initialize`: each request carries the version in `_meta`.
// Prints one JSON object: what each call saw, and the wire traffic the test checks (each
// request sent, with its version and retry fields, and each response's resultType).
import { Client, PROTOCOL_VERSION_META_KEY } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [python, workspace] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: python, args: ["-m", "retinue", "mcp", "serve", "--model", "openai:test"],
  cwd: workspace, env: process.env, stderr: "inherit",
});
const client = new Client({ name: "ts2-test", version: "1.0.0" }, {
  capabilities: { elicitation: { form: {} } },
  versionNegotiation: { mode: { pin: "2026-07-28" } },
});
const asked = [];
client.setRequestHandler("elicitation/create", async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: { answer: "teal" } };
});
// The wire, as the client sees it: what it sends and what each response is.
const sent = [];
const resultTypes = [];
const send = transport.send.bind(transport);
transport.send = async (message, options) => {
  if (message.method) {
    const params = message.params ?? {};
    sent.push({ method: message.method, name: params.name ?? null,
                version: params._meta?.[PROTOCOL_VERSION_META_KEY] ?? null,
                retry: params.requestState !== undefined,
                answered: params.inputResponses ?? null });
  }
  return send(message, options);
};
await client.connect(transport);
const receive = transport.onmessage;
transport.onmessage = (message, extra) => {
  if (message.result) resultTypes.push(message.result.resultType ?? null);
  return receive(message, extra);
};
const text = (r) => r.content.map((c) => c.text || "").join("\n");
const out = {
  protocol: client.getNegotiatedProtocolVersion() ?? null,
  era: client.getProtocolEra() ?? null,
  server: client.getServerVersion() ?? null,
  discovered: client.getDiscoverResult()?.supportedVersions ?? null,
};
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
const once = await client.callTool({ name: "SubAgent", arguments: { task: "sum", role: "helper" } });
out.once = { isError: once.isError ?? false, text: text(once) };
const painted = await client.callTool({ name: "SubAgent", arguments: { task: "paint", role: "asker" } });
out.painted = { isError: painted.isError ?? false, text: text(painted) };
out.asked = asked;
out.sent = sent;
out.resultTypes = resultTypes;
await client.close();
console.log(JSON.stringify(out));
