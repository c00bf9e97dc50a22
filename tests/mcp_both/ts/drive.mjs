// The TypeScript MCP SDK's client against `retinue mcp serve` on stdio (2025-11-25, the
// newest version this SDK speaks): node drive.mjs <python> <workspace>. The environment is
// the server's. Prints one JSON object: what each call saw.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [python, workspace] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: python, args: ["-m", "retinue", "mcp", "serve", "--model", "openai:test"],
  cwd: workspace, env: process.env, stderr: "inherit",
});
const client = new Client({ name: "ts-test", version: "1.0.0" },
                          { capabilities: { elicitation: { form: {} } } });
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  return { action: "accept", content: { answer: "teal" } };
});
await client.connect(transport);
const text = (r) => r.content.map((c) => c.text || "").join("\n");
const out = { server: client.getServerVersion(), protocol: transport.protocolVersion ?? null };
const unknown = await client.callTool({ name: "SubAgent", arguments: { task: "x", role: "nobody" } });
out.unknown = { isError: unknown.isError, text: text(unknown) };
const painted = await client.callTool({ name: "SubAgent", arguments: { task: "paint", role: "asker" } });
out.painted = { isError: painted.isError ?? false, text: text(painted),
                structured: painted.structuredContent ?? null };
out.asked = asked;
await client.close();
console.log(JSON.stringify(out));
