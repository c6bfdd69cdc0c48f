// A minimal MCP client for `bashexec mcp`, with the official TypeScript SDK
// (npm install @modelcontextprotocol/sdk): connect, list the tools, run one
// command, print its result text. Usage: node mcp_client.mjs [BASHEXEC] [COMMAND]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const bashexec = process.argv[2] ?? 'bashexec';
const command = process.argv[3] ?? 'uname -s; echo hello from bashexec';

const client = new Client({ name: 'bashexec-example', version: '1.0.0' });
await client.connect(new StdioClientTransport({ command: bashexec, args: ['mcp'] }));

const { tools } = await client.listTools();
console.log(`tools: ${tools.map((t) => t.name).join(', ')}`);

const result = await client.callTool({ name: 'bash', arguments: { command, description: 'example command' } });
console.log(result.content.map((c) => c.text).join(''));
console.log(`isError: ${result.isError}, exit code: ${result.structuredContent?.exit_code}`);

await client.close(); // end of input: the server kills what is left and exits
process.exitCode = result.isError ? 1 : 0;
