// Starts `ringlm serve` on a free port, waits for /health, runs a command with RINGLM_URL (and
// RINGLM_API_KEY) in its environment, then stops the server with SIGTERM and checks that it
// drained and exited 0. Used by ctest (tests/CMakeLists.txt):
//   node with_server.mjs RINGLM_BINARY MODEL_DIR [serve flags...] -- COMMAND [ARGS...]
import { spawn } from 'node:child_process';

const args = process.argv.slice(2);
const split = args.indexOf('--');
if (split < 2) {
  console.error('usage: node with_server.mjs BINARY MODEL_DIR [flags] -- COMMAND [ARGS]');
  process.exit(2);
}
const [binary, model, ...flags] = args.slice(0, split);
const command = args.slice(split + 1);
const keyAt = flags.indexOf('--api-key');
const apiKey = keyAt >= 0 ? flags[keyAt + 1] : '';

const server = spawn(binary, ['serve', model, '--port', '0', ...flags],
                     { stdio: ['ignore', 'pipe', 'inherit'] });
let serverExit = null;
const exited = new Promise(resolve => server.on('exit', (code, signal) => {
  serverExit = { code, signal };
  resolve();
}));

const url = await new Promise((resolve, reject) => {
  let out = '';
  server.stdout.on('data', d => {
    out += d;
    const m = out.match(/listening on (http:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  exited.then(() => reject(new Error(`ringlm serve exited early: ${JSON.stringify(serverExit)}`)));
});

for (let i = 0; ; ++i) {
  try {
    if ((await fetch(`${url}/health`)).ok) break;
  } catch {}
  if (i > 600) throw new Error('the server never became healthy');
  await new Promise(r => setTimeout(r, 100));
}

const child = spawn(command[0], command.slice(1), {
  stdio: 'inherit',
  env: { ...process.env, RINGLM_URL: url, RINGLM_API_KEY: apiKey },
});
const testCode = await new Promise(resolve => child.on('exit', code => resolve(code ?? 1)));

server.kill('SIGTERM');
const timer = setTimeout(() => server.kill('SIGKILL'), 60000);
await exited;
clearTimeout(timer);
if (serverExit.code !== 0) {
  console.error(`ringlm serve did not exit 0 after SIGTERM: ${JSON.stringify(serverExit)}`);
  process.exit(1);
}
process.exit(testCode);
