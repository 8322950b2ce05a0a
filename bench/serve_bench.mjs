// Serving benchmark: starts `ringlm serve` on a free port, streams /v1/completions requests at
// several concurrencies and reports throughput and TTFT / inter-token latency (ITL, per event as
// the client sees it) / time per output token (TPOT, per request) percentiles; then
// runs `ringlm generate` on the same prompt for the server tax (the server's single-stream decode
// rate against the CLI's, same process settings).
//   node bench/serve_bench.mjs --binary build/ringlm --model DIR [--prompt-len 64] [--gen 64]
//       [--requests 32] [--concurrency 1,8,32] [--threads N] [-- extra serve flags]
// No npm packages needed (fetch + SSE parsing by hand). Token-id prompts keep the tokenizer out.
import { spawn, spawnSync, execFileSync } from 'node:child_process';

const argv = process.argv.slice(2);
const extraAt = argv.indexOf('--');
const extra = extraAt >= 0 ? argv.slice(extraAt + 1) : [];
const opt = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && (extraAt < 0 || i < extraAt) ? argv[i + 1] : fallback;
};
const binary = opt('binary', 'build/ringlm');
const model = opt('model');
if (!model) { console.error('--model DIR is required'); process.exit(2); }
const promptLen = Number(opt('prompt-len', 64));
const gen = Number(opt('gen', 64));
const requests = Number(opt('requests', 32));
const levels = opt('concurrency', '1,8,32').split(',').map(Number);
const threads = opt('threads', '');
const threadFlags = threads ? ['--threads', threads] : [];

const vocab = JSON.parse(execFileSync(binary, ['inspect', model, '--json']).toString()).vocab_size ?? 256;
const prompt = i => Array.from({ length: promptLen }, (_, k) => 3 + ((k * 31 + i * 17) % Math.min(vocab - 3, 250)));

const server = spawn(binary, ['serve', model, '--port', '0', ...threadFlags, ...extra],
                     { stdio: ['ignore', 'pipe', 'ignore'] });
const url = await new Promise((resolve, reject) => {
  let out = '';
  server.stdout.on('data', d => {
    out += d;
    const m = out.match(/listening on (http:\/\/\S+)/);
    if (m) resolve(m[1]);
  });
  server.on('exit', () => reject(new Error('ringlm serve exited')));
});

async function one(i) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: prompt(i), max_tokens: gen, temperature: 0, ignore_eos: true,
                           stream: true, logprobs: 0 }),
  });
  if (!res.ok) throw new Error(`${res.status} ${await res.text()}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '', tokens = 0, ttft = null, last = t0, first = t0;
  const itl = [];
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!line.startsWith('data: {')) continue;
      const n = JSON.parse(line.slice(6)).choices[0]?.logprobs?.tokens?.length ?? 0;
      if (!n) continue;
      const now = performance.now();
      if (ttft === null) {
        ttft = now - t0;
        first = now;
      } else {
        for (let k = 0; k < n; ++k) itl.push((now - last) / n);
      }
      last = now;
      tokens += n;
    }
  }
  // Time per output token after the first: immune to several events arriving in one read.
  const tpot = tokens > 1 ? (last - first) / (tokens - 1) : NaN;
  return { ttft, itl, tokens, tpot };
}

const pct = (xs, p) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const f = x => x.toFixed(1);

console.log(`model ${model}, prompt ${promptLen} tokens, ${gen} generated, ` +
            `max(${requests}, concurrency) requests per level`);
console.log('| concurrency | tok/s | TTFT p50/p90/p99 ms | ITL p50/p90/p99 ms | TPOT p50/p90/p99 ms |');
console.log('|---|---|---|---|---|');
let singleTpot = NaN;
await one(0);  // warm-up
for (const c of levels) {
  const results = [];
  let next = 0;
  const total = Math.max(requests, c);  // every stream of the level busy at once
  const t0 = performance.now();
  await Promise.all(Array.from({ length: c }, async () => {
    while (next < total) results.push(await one(next++));
  }));
  const seconds = (performance.now() - t0) / 1000;
  const tokens = results.reduce((a, r) => a + r.tokens, 0);
  const ttft = results.map(r => r.ttft), itl = results.flatMap(r => r.itl);
  const tpot = results.map(r => r.tpot);
  if (c === 1) singleTpot = pct(tpot, 50);
  const three = xs => `${f(pct(xs, 50))} / ${f(pct(xs, 90))} / ${f(pct(xs, 99))}`;
  console.log(`| ${c} | ${f(tokens / seconds)} | ${three(ttft)} | ${three(itl)} | ${three(tpot)} |`);
}
server.kill('SIGTERM');
await new Promise(r => server.on('exit', r));

// The CLI on the same prompt: its decode rate (best of 3) against the server's single stream.
let decode = 0;
for (let run = 0; run < 3; ++run) {
  const cli = spawnSync(binary, ['generate', '--model', model, '--prompt-tokens',
                                 prompt(0).join(','), '--max-tokens', String(gen),
                                 ...threadFlags]).stderr.toString();
  decode = Math.max(decode, Number(cli.match(/decode ([\d.]+) tok\/s/)?.[1]));
}
const serverRate = 1000 / singleTpot;
console.log(`single stream decode: server ${f(serverRate)} tok/s, ringlm generate ${f(decode)} tok/s ` +
            `(server tax ${f(100 * (1 - serverRate / decode))}%)`);
