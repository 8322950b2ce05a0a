// Soak test: N requests at concurrency C against a running server (RINGLM_URL), with ~10% of
// clients disconnecting mid-stream and ~10% malformed requests. Passes when the server never
// fails a good request, every malformed one gets a 4xx JSON error, /metrics shows no KV block
// in use at the end, and a sample of completed greedy requests equals the same requests run
// one at a time (batched-equals-serial).
//   node soak.mjs [--n 300] [--c 16] [--seed 1]        (ctest runs 300 at 16)
//   full size: node soak.mjs --n 2000 --c 64
import assert from 'node:assert/strict';
import { url, apiKey, noEos, waitIdle } from './util.mjs';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const N = arg('n', 300), C = arg('c', 16);
let rng = arg('seed', 1);
const rand = () => ((rng = (rng * 1103515245 + 12345) % 2147483648) / 2147483648);
const headers = { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` };

function makeJob(i) {
  const r = rand();
  const words = ['the', 'weather', 'in', 'paris', 'is', 'often', 'grey', 'but', 'warm'];
  const prompt = Array.from({ length: 2 + Math.floor(rand() * 12) },
                            () => words[Math.floor(rand() * words.length)]).join(' ');
  const body = { prompt, max_tokens: 4 + Math.floor(rand() * 24), temperature: 0,
                 logit_bias: noEos, stream: rand() < 0.5 };
  if (r < 0.1) return { i, kind: 'malformed', raw: rand() < 0.5 ? '{"prompt": ' : JSON.stringify({ prompt, temperature: -1 }) };
  // Long enough (the context is 1024) that the client leaves before the server is done.
  if (r < 0.2) return { i, kind: 'disconnect', body: { ...body, stream: true, max_tokens: 900 } };
  return { i, kind: 'good', body };
}

async function run(job) {
  if (job.kind === 'malformed') {
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers, body: job.raw });
    const json = await res.json();
    assert.ok(res.status >= 400 && res.status < 500, `malformed got ${res.status}`);
    assert.equal(typeof json.error.message, 'string');
    return null;
  }
  const controller = new AbortController();
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers, body: JSON.stringify(job.body), signal: controller.signal,
  });
  if (res.status !== 200) assert.fail(`request ${job.i}: ${res.status} ${await res.text()}`);
  if (!job.body.stream) {
    const json = await res.json();
    assert.equal(json.choices[0].finish_reason, 'length');
    return json.choices[0].text;
  }
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '', text = '', events = 0, finish = null, sawDone = false;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!line.startsWith('data: ')) continue;
      if (line === 'data: [DONE]') { sawDone = true; continue; }
      const chunk = JSON.parse(line.slice(6));
      text += chunk.choices[0]?.text ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (job.kind === 'disconnect' && ++events === 3) {
        controller.abort();
        await reader.cancel().catch(() => {});  // undici closes the socket once the body is dropped
        return null;
      }
    }
  }
  if (job.kind === 'disconnect') return null;  // finished before the third event
  assert.ok(sawDone, `request ${job.i}: no [DONE]`);
  assert.equal(finish, 'length');
  return text;
}

const jobs = Array.from({ length: N }, (_, i) => makeJob(i));
const results = new Array(N);
let next = 0, failures = 0;
const start = Date.now();
await Promise.all(Array.from({ length: C }, async () => {
  while (next < N) {
    const job = jobs[next++];
    try {
      results[job.i] = await run(job);
    } catch (e) {
      if (job.kind === 'disconnect' && e.name === 'AbortError') continue;
      ++failures;
      console.error(`job ${job.i} (${job.kind}): ${e.message}`);
    }
  }
}));
const seconds = (Date.now() - start) / 1000;
assert.equal(failures, 0, `${failures} requests failed`);

const m = await waitIdle(60000);
assert.equal(m.value('ringlm_kv_blocks_used'), 0, 'KV blocks still in use after the soak');
assert.equal(m.value('ringlm_requests_running'), 0);
const disconnects = jobs.filter(j => j.kind === 'disconnect').length;
const noticed = m.value('ringlm_client_disconnects_total');
assert.ok(noticed > 0 && noticed <= disconnects, `${noticed} of ${disconnects} disconnects noticed`);

// Batched equals serial: re-run a sample of good greedy requests one at a time.
const good = jobs.filter(j => j.kind === 'good' && typeof results[j.i] === 'string');
const sample = good.filter((_, k) => k % Math.max(1, Math.floor(good.length / 20)) === 0);
for (const job of sample) {
  const serial = await run({ ...job, body: { ...job.body, stream: false } });
  assert.equal(serial, results[job.i], `request ${job.i}: batched text differs from serial`);
}
console.log(`soak: ${N} requests at ${C} concurrent in ${seconds.toFixed(1)} s; ` +
            `${good.length} good completed, ${sample.length} equal to serial runs; ` +
            `${noticed} of ${disconnects} disconnects cancelled by the server; KV blocks in use 0`);
