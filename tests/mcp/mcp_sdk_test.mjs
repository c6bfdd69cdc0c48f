// Drives `bashexec mcp` with the official MCP TypeScript SDK (its Client,
// with StdioClientTransport, or with StreamableHTTPClientTransport against
// `bashexec mcp --http`; @modelcontextprotocol/sdk pinned in
// package-lock.json) the way Claude Code or any SDK-based client would. Both
// transports run the same checks; each adds those only it can fail.
// Usage: node mcp_sdk_test.mjs BASHEXEC WORKDIR [--http]. Prints each
// sub-check it ran; exits non-zero when a check failed or did not run.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  ElicitRequestSchema,
  TaskStatusNotificationSchema,
  LoggingMessageNotificationSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';

const overHttp = process.argv.includes('--http');
const [bashexec, workdirBase] = process.argv.slice(2).filter((a) => a !== '--http');
if (!bashexec || !workdirBase) {
  console.error('usage: node mcp_sdk_test.mjs BASHEXEC WORKDIR [--http]');
  process.exit(2);
}
const workdir = join(workdirBase, `mcp-sdk-${overHttp ? 'http-' : ''}${process.pid}`);
rmSync(workdir, { recursive: true, force: true });
mkdirSync(workdir, { recursive: true });

const expected = [
  'initialize',
  'list tools',
  'foreground call',
  'denied write under read-only',
  'background start and bash_output until completed',
  'logging notice of the settled task',
  'logging/setLevel honoured',
  'cancellation kills the running sleep',
  'progress notifications on a 2 s command',
  'elicitation-approved escalation',
  'elicitation-rejected escalation',
  'no elicitation capability: unavailable',
  'tool argument error',
  'unknown tool is a JSON-RPC error',
  'tasks: capability and taskSupport',
  'tasks: callToolStream to the same result a plain call gives',
  'tasks: getTask, listTasks, getTaskResult',
  'tasks: cancelTask kills the command; cancelling an ended task is an error',
  'tasks: an escalation makes the task input_required until answered',
  ...(overHttp
    ? [
        'http: a dropped connection mid-call is resumed with Last-Event-ID and the call completes',
        'http: session DELETE kills its commands',
        'http: SIGTERM answers the call in flight, kills everything, exits 143',
      ]
    : ['client closes: nothing left running']),
];
const ran = new Set();
let failures = 0;

function check(name, condition, detail = '') {
  if (condition) {
    console.log(`ok   - ${name}`);
  } else {
    failures++;
    console.log(`FAIL - ${name}${detail ? `: ${detail}` : ''}`);
  }
}

async function section(name, body) {
  ran.add(name);
  try {
    await body();
  } catch (e) {
    failures++;
    console.log(`FAIL - ${name}: threw ${e?.stack ?? e}`);
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/// Pids of processes whose command line contains `needle` (this test's own
/// pgrep excluded).
function pids(needle) {
  try {
    return execFileSync('pgrep', ['-f', needle], { encoding: 'utf8' }).split('\n').filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

async function waitUntil(predicate, ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await predicate()) return true;
    await sleep(50);
  }
  return predicate();
}

function text(result) {
  return result.content.map((c) => c.text).join('');
}

async function connect({ elicitation = true, answer = () => ({ action: 'cancel' }), via = null } = {}) {
  const client = new Client(
    { name: 'bashexec-sdk-test', version: '1.0.0' },
    { capabilities: elicitation ? { elicitation: {} } : {} },
  );
  const questions = [];
  if (elicitation) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      questions.push(request.params);
      return answer(request.params);
    });
  }
  const notices = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => notices.push(n.params));
  const transport = overHttp
    ? new StreamableHTTPClientTransport(new URL(via ? via.url : http.url))
    : new StdioClientTransport({
        command: bashexec,
        args: ['mcp', '--workdir', workdir],
        stderr: 'pipe',
      });
  await client.connect(transport);
  return { client, transport, notices, questions };
}

/// A TCP relay in front of the HTTP server, whose connections the test can
/// drop all at once (a network that failed) while both ends live on. It
/// notes whether a client came back with Last-Event-ID.
function makeRelay() {
  const sockets = new Set();
  const relay = { url: '', port: 0, upstream: 0, resumedWith: [] };
  const listener = net.createServer((down) => {
    const up = net.connect(relay.upstream, '127.0.0.1');
    for (const s of [down, up]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
    }
    down.on('data', (chunk) => {
      const found = /last-event-id: *([^\r\n]+)/i.exec(chunk.toString('latin1'));
      if (found) relay.resumedWith.push(found[1]);
    });
    down.pipe(up);
    up.pipe(down);
  });
  relay.listening = new Promise((resolve) => listener.listen(0, '127.0.0.1', () => {
    relay.port = listener.address().port;
    resolve();
  }));
  relay.cut = () => { for (const s of sockets) s.destroy(); };
  relay.close = () => { relay.cut(); listener.close(); };
  return relay;
}

/// `bashexec mcp --http 127.0.0.1:0`, its address read from its stderr.
async function startHttpServer(relay) {
  await relay.listening;
  const child = spawn(bashexec, ['mcp', '--http', '127.0.0.1:0', '--workdir', workdir,
    '--allow-host', `127.0.0.1:${relay.port}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stopping = false;
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => {
    // Only the SIGTERM check ends it: any other exit is a failure, said with its stderr.
    if (!stopping) check('http: the server runs until told to stop', false, `exit ${code} signal ${signal}: ${stderr}`);
    resolve({ code, signal });
  }));
  let stderr = '';
  const url = await new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
      const found = /MCP over HTTP at (\S+)/.exec(stderr);
      if (found) resolve(found[1]);
    });
    exited.then(({ code }) => reject(new Error(`bashexec mcp --http exited ${code}: ${stderr}`)));
  });
  relay.upstream = Number(new URL(url).port);
  relay.url = `http://127.0.0.1:${relay.port}/mcp`;
  return { child, url, exited, stderr: () => stderr, stop: () => { stopping = true; child.kill('SIGTERM'); } };
}

const relay = overHttp ? makeRelay() : null;
const http = overHttp ? await startHttpServer(relay) : null;

const bash = (command, extra = {}) => ({
  name: 'bash',
  arguments: { command, description: 'test command', ...extra },
});

// Unique per run, so that pgrep finds only this test's commands.
const tag = `${process.pid}${Date.now() % 100000}`;

let answer = { action: 'cancel' };
const main = await connect({ answer: () => answer });
const { client } = main;

await section('initialize', async () => {
  check('initialize: the server names itself', client.getServerVersion()?.name === 'bashexec');
  const caps = client.getServerCapabilities();
  check('initialize: tools and logging capabilities', caps?.tools !== undefined && caps?.logging !== undefined);
});

await section('list tools', async () => {
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  check('list tools: bash, bash_output, bash_kill, bash_input', tools.map((t) => t.name).join(',') === 'bash,bash_output,bash_kill,bash_input');
  check('list tools: bash offers tty', 'tty' in byName.bash.inputSchema.properties);
  check('list tools: bash_input is not read-only', byName.bash_input.annotations?.readOnlyHint === false);
  check('list tools: bash inputSchema requires command', byName.bash.inputSchema.required.includes('command'));
  check('list tools: bash offers sandbox_permissions', 'sandbox_permissions' in byName.bash.inputSchema.properties);
  check('list tools: bash_output is read-only', byName.bash_output.annotations?.readOnlyHint === true);
  check('list tools: bash is not read-only', byName.bash.annotations?.readOnlyHint === false);
  check('list tools: bash_kill is not read-only', byName.bash_kill.annotations?.readOnlyHint === false);
  // With an outputSchema the SDK validates every structuredContent against it
  // (and fails a call that answers without one): each result below is checked.
  check('list tools: every tool declares an outputSchema with the exec facts',
    tools.every((t) => t.outputSchema?.type === 'object' && t.outputSchema.required.includes('exit_code') &&
      t.outputSchema.required.includes('task_id')));
});

await section('foreground call', async () => {
  const r = await client.callTool(bash('printf "hello\\n"; exit 3'));
  check('foreground call: byte-exact text', text(r) === 'hello\n[exit code: 3]', JSON.stringify(text(r)));
  check('foreground call: a non-zero exit is not an error', r.isError === false);
  check('foreground call: structuredContent exit_code', r.structuredContent?.exit_code === 3);
});

await section('denied write under read-only', async () => {
  const r = await client.callTool(bash(`touch ${workdir}/denied`));
  check('denied write: marker', text(r).includes('[sandbox: file access denied under read-only mode]'), text(r));
  check('denied write: structuredContent denied', r.structuredContent?.denied === true);
  check('denied write: structuredContent mode and enforcement',
    r.structuredContent?.mode === 'read-only' && typeof r.structuredContent?.enforcement === 'string',
    JSON.stringify(r.structuredContent));
  check('denied write: no file', !existsSync(join(workdir, 'denied')));
});

await section('background start and bash_output until completed', async () => {
  const started = await client.callTool(bash('echo bg-out; sleep 0.3; echo bg-done', { run_in_background: true }));
  const id = started.structuredContent?.task_id;
  check('background: started text', text(started) === `started background task ${id}`, text(started));
  let all = '';
  let last;
  const done = await waitUntil(async () => {
    last = await client.callTool({ name: 'bash_output', arguments: { task_id: id } });
    all += text(last);
    return last.structuredContent?.status === 'completed';
  }, 20000);
  check('background: completed', done, text(last ?? { content: [] }));
  check('background: output read', all.includes('bg-out') && all.includes('bg-done'), all);
  check('background: status line', text(last).includes('[status: completed, exit code: 0]'), text(last));

  await section('logging notice of the settled task', async () => {
    const seen = await waitUntil(() => main.notices.some((n) => String(n.data).includes(`background task ${id} finished`)), 10000);
    check('logging notice: notifications/message with the notice text', seen, JSON.stringify(main.notices));
    const notice = main.notices.find((n) => String(n.data).includes(id));
    check('logging notice: level notice, logger bashexec', notice?.level === 'notice' && notice?.logger === 'bashexec');
  });
});

await section('logging/setLevel honoured', async () => {
  await client.setLoggingLevel('error');
  const quiet = await client.callTool(bash('true', { run_in_background: true }));
  const id = quiet.structuredContent.task_id;
  await waitUntil(async () => (await client.callTool({ name: 'bash_output', arguments: { task_id: id } })).structuredContent?.status !== 'running', 10000);
  await sleep(500); // generous: the notice would follow the settle at once
  check('setLevel error: no notice for a settled task', !main.notices.some((n) => String(n.data).includes(`task ${id} `)));
  await client.setLoggingLevel('debug');
  const loud = await client.callTool(bash('true', { run_in_background: true }));
  const loudId = loud.structuredContent.task_id;
  check('setLevel debug: notices again', await waitUntil(() => main.notices.some((n) => String(n.data).includes(`task ${loudId} `)), 10000));
});

await section('cancellation kills the running sleep', async () => {
  const needle = `sleep 3${tag}`;
  const controller = new AbortController();
  const call = client.callTool(bash(`${needle}`), undefined, { signal: controller.signal });
  const running = await waitUntil(() => pids(needle).length > 0, 10000);
  check('cancellation: the sleep runs', running);
  controller.abort('test cancels');
  let rejected = false;
  try {
    await call;
  } catch {
    rejected = true;
  }
  check('cancellation: the call is abandoned', rejected);
  check('cancellation: the process is gone', await waitUntil(() => pids(needle).length === 0, 10000), pids(needle).join(' '));
  // The server is still serving after a cancellation.
  check('cancellation: the server keeps serving', text(await client.callTool(bash('echo after'))) === 'after\n');
});

await section('progress notifications on a 2 s command', async () => {
  const seen = [];
  const r = await client.callTool(bash('echo tick; sleep 2'), undefined, { onprogress: (p) => seen.push(p) });
  check('progress: the call answers', text(r) === 'tick\n', text(r));
  check('progress: at least one notification', seen.length >= 1, JSON.stringify(seen));
  check('progress: increasing', seen.every((p, i) => i === 0 || p.progress > seen[i - 1].progress));
  check('progress: elapsed time and bytes', seen.some((p) => /running for .* s; \d+ bytes of output/.test(p.message ?? '')), JSON.stringify(seen));
});

const escalate = (file) =>
  bash(`touch ${workdir}/${file}`, { sandbox_permissions: 'workspace-write', justification: 'the test writes a file' });

await section('elicitation-approved escalation', async () => {
  answer = { action: 'accept', content: { approve: true } };
  const before = main.questions.length;
  const r = await client.callTool(escalate('approved'));
  const q = main.questions[before];
  check('approved: a question was asked', q !== undefined);
  check('approved: the message states command, justification and mode',
    q?.message.includes(`touch ${workdir}/approved`) && q?.message.includes('the test writes a file') && q?.message.includes('workspace-write'),
    q?.message);
  check('approved: the command ran with the wider mode', existsSync(join(workdir, 'approved')) && r.isError === false, text(r));
});

await section('elicitation-rejected escalation', async () => {
  answer = { action: 'decline' };
  const r = await client.callTool(escalate('rejected'));
  check('rejected: error result', r.isError === true && text(r).includes('was rejected'), text(r));
  check('rejected: nothing ran', !existsSync(join(workdir, 'rejected')));
  answer = { action: 'accept', content: { approve: false } };
  const r2 = await client.callTool(escalate('rejected2'));
  check('rejected: accept without approve is a rejection', r2.isError === true && text(r2).includes('was rejected'), text(r2));
  answer = { action: 'cancel' };
  const r3 = await client.callTool(escalate('cancelled'));
  check('rejected: cancel is cancelled', r3.isError === true && text(r3).includes('cancelled'), text(r3));
  check('rejected: nothing ran either time', !existsSync(join(workdir, 'rejected2')) && !existsSync(join(workdir, 'cancelled')));
});

await section('no elicitation capability: unavailable', async () => {
  const plain = await connect({ elicitation: false });
  const r = await plain.client.callTool(escalate('unavailable'));
  check('unavailable: the documented outcome', r.isError === true && text(r).includes('approval is unavailable'), text(r));
  check('unavailable: nothing ran', !existsSync(join(workdir, 'unavailable')));
  await plain.client.close();
});

await section('tool argument error', async () => {
  const r = await client.callTool({ name: 'bash', arguments: { command: 'true' } });
  check('argument error: isError result', r.isError === true && text(r) === 'missing required field "description"', text(r));
});

await section('unknown tool is a JSON-RPC error', async () => {
  let code;
  try {
    await client.callTool({ name: 'no_such_tool', arguments: {} });
  } catch (e) {
    code = e instanceof McpError ? e.code : e;
  }
  check('unknown tool: -32602', code === -32602, String(code));
});

// Tasks (2025-11-25): a `bash` call as a task, driven through the SDK's
// experimental task API, which polls tasks/get and then reads tasks/result.
await section('tasks: capability and taskSupport', async () => {
  const caps = client.getServerCapabilities();
  check('tasks: the server declares tasks.requests.tools.call, list and cancel',
    caps?.tasks?.requests?.tools?.call !== undefined && caps?.tasks?.list !== undefined && caps?.tasks?.cancel !== undefined,
    JSON.stringify(caps?.tasks));
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  check('tasks: bash is optional, bash_output and bash_kill are not tasks',
    byName.bash.execution?.taskSupport === 'optional' && byName.bash_output.execution === undefined &&
      byName.bash_kill.execution === undefined && byName.bash_input.execution === undefined,
    JSON.stringify(tools.map((t) => t.execution)));
});

await section('tasks: callToolStream to the same result a plain call gives', async () => {
  const call = bash('echo from-a-task; exit 5');
  const plain = await client.callTool(call);
  const seen = [];
  let result;
  for await (const message of client.experimental.tasks.callToolStream(call, undefined, { task: { ttl: 60000 } })) {
    seen.push(message.type);
    if (message.type === 'result') result = message.result;
    if (message.type === 'error') check('tasks: no error in the stream', false, String(message.error));
  }
  check('tasks: taskCreated first, result last', seen[0] === 'taskCreated' && seen.at(-1) === 'result', seen.join(','));
  check('tasks: the same text as the plain call', result && text(result) === text(plain), JSON.stringify(result));
  check('tasks: the same structuredContent', JSON.stringify(result?.structuredContent) === JSON.stringify(plain.structuredContent),
    JSON.stringify(result?.structuredContent));
  check('tasks: the result names its task', typeof result?._meta?.['io.modelcontextprotocol/related-task']?.taskId === 'string');
});

await section('tasks: getTask, listTasks, getTaskResult', async () => {
  let created;
  for await (const message of client.experimental.tasks.callToolStream(bash('echo listed'), undefined, { task: {} })) {
    if (message.type === 'taskCreated') created = message.task;
  }
  check('tasks: created with an id, working, timestamps and a ttl', created?.status === 'working' &&
    typeof created?.taskId === 'string' && !Number.isNaN(Date.parse(created?.createdAt)) && typeof created?.ttl === 'number',
    JSON.stringify(created));
  const got = await client.experimental.tasks.getTask(created.taskId);
  check('tasks: getTask says completed', got.status === 'completed', JSON.stringify(got));
  const listed = await client.experimental.tasks.listTasks();
  check('tasks: listTasks holds it', listed.tasks.some((t) => t.taskId === created.taskId && t.status === 'completed'),
    JSON.stringify(listed));
  const again = await client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
  check('tasks: getTaskResult gives the result again', text(again) === 'listed\n', JSON.stringify(again));
});

await section('tasks: cancelTask kills the command; cancelling an ended task is an error', async () => {
  const needle = `sleep 7${tag}`;
  const stream = client.experimental.tasks.callToolStream(bash(needle), undefined, { task: {} });
  const first = await stream.next();
  const id = first.value?.task?.taskId;
  check('cancel: a task was created', typeof id === 'string', JSON.stringify(first.value));
  check('cancel: the sleep runs', await waitUntil(() => pids(needle).length > 0, 10000));
  const cancelled = await client.experimental.tasks.cancelTask(id);
  check('cancel: answered cancelled', cancelled.status === 'cancelled', JSON.stringify(cancelled));
  check('cancel: the process is gone', await waitUntil(() => pids(needle).length === 0, 10000), pids(needle).join(' '));
  let last;
  for await (const message of stream) last = message;
  check('cancel: the stream ends with an error', last?.type === 'error', JSON.stringify(last));
  check('cancel: getTask says cancelled', (await client.experimental.tasks.getTask(id)).status === 'cancelled');
  let code;
  try {
    await client.experimental.tasks.cancelTask(id);
  } catch (e) {
    code = e instanceof McpError ? e.code : String(e);
  }
  check('cancel: cancelling it again is -32602', code === -32602, String(code));
});

await section('tasks: an escalation makes the task input_required until answered', async () => {
  const statuses = [];
  client.setNotificationHandler(TaskStatusNotificationSchema, (n) => statuses.push(n.params));
  answer = { action: 'accept', content: { approve: true } };
  const before = main.questions.length;
  let result;
  let id;
  for await (const message of client.experimental.tasks.callToolStream(escalate('from-task'), undefined, { task: {} })) {
    if (message.type === 'taskCreated') id = message.task.taskId;
    if (message.type === 'result') result = message.result;
  }
  answer = { action: 'cancel' };
  const q = main.questions[before];
  check('input_required: the question was asked, naming its task',
    typeof q?._meta?.['io.modelcontextprotocol/related-task']?.taskId === 'string', JSON.stringify(q?._meta));
  check('input_required: the approved command ran', existsSync(join(workdir, 'from-task')) && result?.isError === false,
    JSON.stringify(result));
  const mine = statuses.filter((t) => t.taskId === id).map((t) => t.status);
  check('input_required: notifications/tasks/status went input_required, working, completed',
    mine.join(',') === 'input_required,working,completed', mine.join(','));
});

if (overHttp) {
  await section('http: a dropped connection mid-call is resumed with Last-Event-ID and the call completes', async () => {
    const relayed = await connect({ via: relay });
    const tokens = [];
    const call = relayed.client.callTool(bash(`sleep 2; echo resumed-${tag}`), CallToolResultSchema, {
      onresumptiontoken: (token) => tokens.push(token),
      timeout: 60000,
    });
    check('resume: the stream opened with an event id', await waitUntil(() => tokens.length > 0, 10000));
    await sleep(300);
    relay.cut();
    const r = await call;
    check('resume: the call completed after the drop', text(r).includes(`resumed-${tag}`), text(r));
    check('resume: the client came back with Last-Event-ID', relay.resumedWith.length > 0, relay.resumedWith.join(' '));
    await relayed.client.close();
  });

  await section('http: session DELETE kills its commands', async () => {
    const own = await connect();
    const needle = `sleep 7${tag}`;
    await own.client.callTool(bash(needle, { run_in_background: true }));
    check('delete: the background sleep runs', await waitUntil(() => pids(needle).length > 0, 10000));
    await own.transport.terminateSession();
    check('delete: the background sleep is gone', await waitUntil(() => pids(needle).length === 0, 10000),
      pids(needle).join(' '));
    let refused = null;
    try {
      await own.client.callTool(bash('true'));
    } catch (e) {
      refused = e;
    }
    check('delete: the ended session takes no more calls', refused !== null, String(refused));
    await own.client.close().catch(() => {});
  });

  await section('http: SIGTERM answers the call in flight, kills everything, exits 143', async () => {
    const background = `sleep 8${tag}`;
    const foreground = `sleep 9${tag}`;
    await client.callTool(bash(background, { run_in_background: true }));
    const inFlight = client.callTool(bash(foreground), CallToolResultSchema, { timeout: 60000 }).catch((e) => e);
    check('sigterm: both commands run', await waitUntil(() => pids(background).length > 0 && pids(foreground).length > 0, 10000));
    http.stop();
    const { code } = await http.exited;
    check('sigterm: exit 143', code === 143, `exit ${code}; stderr: ${http.stderr()}`);
    const answer = await inFlight;
    check('sigterm: the call in flight was answered, as aborted', answer?.content !== undefined && answer.isError === true,
      answer?.content ? text(answer) : String(answer));
    check('sigterm: nothing left running', pids(background).length === 0 && pids(foreground).length === 0,
      [...pids(background), ...pids(foreground)].join(' '));
    await client.close().catch(() => {});
    relay.close();
  });
}

if (!overHttp) await section('client closes: nothing left running', async () => {
  const needle = `sleep 4${tag}`;
  await client.callTool(bash(needle, { run_in_background: true }));
  check('close: the background sleep runs', await waitUntil(() => pids(needle).length > 0, 10000));
  const pid = main.transport.pid;
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  // End of input ourselves, then wait: the SDK's close() would SIGTERM the
  // server after 2 s, which a loaded machine can outlast while the server
  // kills and reaps its tasks, and the check is about end of input alone.
  // (The SDK version is pinned by the lock file; `_process` is its child.)
  const began = Date.now();
  main.transport._process?.stdin?.end();
  const exited = await waitUntil(() => !alive(), 10000);
  const took = Date.now() - began;
  await client.close();
  check('close: the server exited on end of input', exited, `took ${took} ms`);
  check('close: the background sleep is gone', await waitUntil(() => pids(needle).length === 0, 10000), pids(needle).join(' '));
});

rmSync(workdir, { recursive: true, force: true });
for (const name of expected) if (!ran.has(name)) check(`${name} ran`, false, 'never ran');
console.log(`${failures === 0 ? 'PASS' : 'FAIL'}: ${ran.size} of ${expected.length} checks ran, ${failures} failure(s)`);
process.exit(failures === 0 && ran.size === expected.length ? 0 : 1);
