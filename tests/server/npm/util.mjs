// Shared by the client tests: the server under test, clients for it and fixture facts.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

export const url = process.env.RINGLM_URL;
export const apiKey = process.env.RINGLM_API_KEY || 'none';
export const model = 'ringlm-test';

export const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0 });
export const anthropic = new Anthropic({ baseURL: url, apiKey, maxRetries: 0 });

// The fixture tokenizer (tests/fixtures/server_model): byte b is token b; 256..263 are the
// merges th he in er an on re at; 264 <|endoftext|>, 266 <|im_end|> (EOS); 269 is one token
// holding a whole Hermes tool call for get_weather {"city": "Paris"}.
export const EOS = [264, 266];
export const TOOL_CALL_TOKEN = 269;
export const noEos = Object.fromEntries(EOS.map(id => [String(id), -100]));
// Output restricted to lowercase letters and the letter-pair merges (tokens of 1 or 2 chars).
export const lettersOnly = (() => {
  const bias = { ...noEos };
  for (let c = 97; c <= 122; ++c) bias[String(c)] = 60;
  for (let id = 256; id <= 263; ++id) bias[String(id)] = 60;
  return bias;
})();

export async function raw(path, { method = 'POST', body, headers = {} } = {}) {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}`, ...headers },
    body: typeof body === 'string' || body === undefined ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let json = null;
  try { json = JSON.parse(text); } catch {}
  return { status: response.status, json, text, headers: response.headers };
}

export async function metrics() {
  const text = await (await fetch(`${url}/metrics`)).text();
  const value = name => {
    const m = text.match(new RegExp(`^${name} (\\S+)$`, 'm'));
    return m ? Number(m[1]) : NaN;
  };
  return { text, value };
}

// Waits until no request runs or waits and no KV block is held by one.
export async function waitIdle(timeoutMs = 20000) {
  const start = Date.now();
  for (;;) {
    const m = await metrics();
    const idle = m.value('ringlm_kv_blocks_used') === 0 && m.value('ringlm_requests_running') === 0 &&
                 m.value('ringlm_requests_waiting') === 0;
    if (idle) return m;
    if (Date.now() - start > timeoutMs) return m;
    await new Promise(r => setTimeout(r, 50));
  }
}
