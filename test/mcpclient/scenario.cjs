// scenario.cjs drives hermes's MCP server with the official TypeScript SDK
// and prints one JSON report of what it saw on stdout; the Go test
// (mcp/tsclient_test.go) checks the report. It asserts nothing itself, so a
// failure shows the whole picture.
//
// Environment:
//   HERMES_MCP_MODE   stdio | runner | http
//   stdio: HERMES_BIN (the hermes binary), HERMES_HOME (the profile),
//          HERMES_OTHER_HOME (another profile: "another tenant")
//   runner: hermes mcp --runner: HERMES_BIN, HERMES_MCP_RUNNER (the runner's
//          URL), HERMES_MCP_TOKEN, HERMES_MCP_OTHER_TOKEN
//   http:  HERMES_MCP_URL (…/mcp), HERMES_MCP_TOKEN, HERMES_MCP_OTHER_TOKEN
//          (a token of another tenant)
'use strict';

const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const {
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} = require('@modelcontextprotocol/sdk/types.js');

const env = process.env;
const mode = env.HERMES_MCP_MODE;

function transport(other) {
  if (mode === 'stdio' || mode === 'runner') {
    const childEnv = { ...env };
    delete childEnv.HERMES_SESSION_ID;
    if (mode === 'stdio') {
      childEnv.HERMES_HOME = other ? env.HERMES_OTHER_HOME : env.HERMES_HOME;
    } else {
      childEnv.HERMES_RUNNER_URL = env.HERMES_MCP_RUNNER;
      childEnv.HERMES_RUNNER_TOKEN = other ? env.HERMES_MCP_OTHER_TOKEN : env.HERMES_MCP_TOKEN;
    }
    return new StdioClientTransport({ command: env.HERMES_BIN, args: ['mcp'], env: childEnv, stderr: 'inherit' });
  }
  const token = other ? env.HERMES_MCP_OTHER_TOKEN : env.HERMES_MCP_TOKEN;
  return new StreamableHTTPClientTransport(new URL(env.HERMES_MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}

async function connect(other) {
  const client = new Client({ name: 'hermes-scenario', version: '1.0.0' });
  await client.connect(transport(other));
  return client;
}

// call returns a tool's JSON result and whether it was a tool error.
async function call(client, name, args, options) {
  const res = await client.callTool({ name, arguments: args }, undefined, options);
  const text = res.content && res.content[0] && res.content[0].text;
  return { isError: !!res.isError, json: JSON.parse(text) };
}

function waitFor(what, cond, ms) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const tick = () => {
      const v = cond();
      if (v) return resolve(v);
      if (Date.now() - start > ms) return reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
      setTimeout(tick, 25);
    };
    tick();
  });
}

async function main() {
  const report = { mode };
  const logs = [];
  const updated = [];
  const client = await connect(false);
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params); });
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { updated.push(n.params.uri); });
  report.server = client.getServerVersion();
  report.protocol = client.transport && client.transport.protocolVersion;

  const tools = await client.listTools();
  report.tools = tools.tools.map((t) => ({ name: t.name, annotations: t.annotations }));
  await client.setLoggingLevel('info');

  // A background job with notify: the notification, the completion once,
  // the resource.
  const started = await call(client, 'terminal', {
    command: 'sleep 1; echo scenario-output; exit 4', background: true, notify: true,
  });
  report.started = started.json;
  const id = started.json.session_id;
  if (!id) throw new Error(`terminal did not start the job: ${JSON.stringify(started)}`);
  const uri = `hermes://processes/${id}`;
  await client.subscribeResource({ uri });
  const log = await waitFor('the completion notification',
    () => logs.find((l) => l.data && l.data.session_id === id), 30000);
  report.notification = log;
  report.resourceUpdated = await waitFor('the resource update', () => updated.includes(uri), 10000);
  report.completions = (await call(client, 'process_manage', { action: 'completions' })).json;
  report.completionsAgain = (await call(client, 'process_manage', { action: 'completions', timeout: 0.5 })).json;
  const read = await client.readResource({ uri });
  report.resource = JSON.parse(read.contents[0].text);
  const listing = await client.readResource({ uri: 'hermes://processes' });
  report.listing = JSON.parse(listing.contents[0].text).map((p) => p.session_id);

  // A long job: wait reports progress, then kill ends it.
  const long = await call(client, 'terminal', { command: 'sleep 120', background: true });
  const longID = long.json.session_id;
  report.progress = [];
  report.waited = (await call(client, 'process_manage', { action: 'wait', session_id: longID, timeout: 3 }, {
    onprogress: (p) => report.progress.push(p),
  })).json;
  report.killed = (await call(client, 'process_manage', { action: 'kill', session_id: longID })).json;

  // Another tenant sees none of it.
  const other = await connect(true);
  report.otherPoll = (await call(other, 'process_manage', { action: 'poll', session_id: id })).json;
  report.otherKill = (await call(other, 'process_manage', { action: 'kill', session_id: longID })).json;
  try {
    await other.readResource({ uri });
    report.otherReadError = null;
  } catch (e) {
    report.otherReadError = String(e.message || e);
  }
  await other.close();
  await client.close();
  process.stdout.write(JSON.stringify(report) + '\n');
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`scenario: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
