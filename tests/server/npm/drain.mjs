// Graceful shutdown: SIGTERM while a stream is in flight. The stream must still finish (every
// token, finish_reason "length", [DONE]), a request sent after the signal must be refused (503,
// or no connection once the listener is closed), and the server must exit 0.
//   node drain.mjs RINGLM_BINARY MODEL_DIR
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';

const [binary, modelDir] = process.argv.slice(2);
const server = spawn(binary, ['serve', modelDir, '--port', '0', '--threads', '2', '--kv-memory', '64'],
                     { stdio: ['ignore', 'pipe', 'inherit'] });
const exited = new Promise(resolve => server.on('exit', (code, signal) => resolve({ code, signal })));
const url = await new Promise(resolve => {
  let out = '';
  server.stdout.on('data', d => {
    out += d;
    const m = out.match(/listening on (http:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
});

const body = { prompt: 'the', max_tokens: 900, temperature: 0, ignore_eos: true, stream: true,
               logprobs: 0 };
const res = await fetch(`${url}/v1/completions`, {
  method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
});
assert.equal(res.status, 200);
const reader = res.body.getReader();
const decoder = new TextDecoder();
let buffer = '', tokens = 0, finish = null, done = false, signalled = false;
for (;;) {
  const { value, done: end } = await reader.read();
  if (end) break;
  buffer += decoder.decode(value, { stream: true });
  let at;
  while ((at = buffer.indexOf('\n\n')) >= 0) {
    const line = buffer.slice(0, at);
    buffer = buffer.slice(at + 2);
    if (line === 'data: [DONE]') { done = true; continue; }
    if (!line.startsWith('data: {')) continue;
    const choice = JSON.parse(line.slice(6)).choices[0];
    tokens += choice.logprobs?.tokens?.length ?? 0;
    finish = choice.finish_reason ?? finish;
    if (!signalled && tokens >= 5) {
      signalled = true;
      server.kill('SIGTERM');
      await new Promise(r => setTimeout(r, 200));
      const late = await fetch(`${url}/v1/completions`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'x', max_tokens: 2 }),
      }).then(r => r.status, () => 'refused');
      assert.ok(late === 503 || late === 'refused', `a request after SIGTERM got ${late}`);
    }
  }
}
assert.ok(signalled, 'the stream ended before the signal could be sent');
assert.equal(tokens, 900);
assert.equal(finish, 'length');
assert.ok(done, 'no [DONE]');
const exit = await exited;
assert.deepEqual(exit, { code: 0, signal: null });
console.log('drain: the in-flight stream finished all 900 tokens after SIGTERM; exit 0');
