// Every error the server answers, in the OpenAI shape {"error": {"message", "type", "param",
// "code"}} or, on /v1/messages, Anthropic's {"type": "error", "error": {"type", "message"}}.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { openai, anthropic, url, apiKey, model, raw } from './util.mjs';

const messages = [{ role: 'user', content: 'Hi' }];

function openaiShape(r, status, param) {
  assert.equal(r.status, status, r.text);
  assert.equal(typeof r.json.error.message, 'string');
  assert.ok(r.json.error.message.length > 0);
  assert.equal(typeof r.json.error.type, 'string');
  assert.equal(r.json.error.code, status);
  if (param !== undefined) assert.equal(r.json.error.param, param);
}

test('malformed JSON and wrong field types are 400s', async () => {
  openaiShape(await raw('/v1/chat/completions', { body: '{"messages": [' }), 400, null);
  openaiShape(await raw('/v1/chat/completions', { body: '[]' }), 400, null);
  openaiShape(await raw('/v1/chat/completions', { body: { messages: 'hi' } }), 400, 'messages');
  openaiShape(await raw('/v1/chat/completions', { body: { messages, temperature: 'hot' } }), 400,
              'temperature');
  openaiShape(await raw('/v1/completions', { body: { prompt: 5 } }), 400, 'prompt');
  openaiShape(await raw('/v1/chat/completions', { body: { messages, n: 'two' } }), 400, 'n');
  // A nested field of the wrong type is a 400 too, not a 500.
  const nested = await raw('/v1/messages', {
    body: { max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 5 }] }] },
  });
  assert.equal(nested.status, 400, nested.text);
  assert.equal(nested.json.type, 'error');
});

test('out-of-range sampling values are 400s through the client', async () => {
  for (const bad of [{ temperature: 3 }, { top_p: 0 }, { top_p: 1.5 }, { min_p: -0.1 },
                     { presence_penalty: 2.5 }, { frequency_penalty: -3 },
                     { repetition_penalty: 0 }, { top_k: -2 }, { n: 0 }, { max_tokens: 0 },
                     { logit_bias: { 99999: 5 } }, { logit_bias: { 5: 200 } },
                     { top_logprobs: 30, logprobs: true }, { stop: [''] }]) {
    await assert.rejects(openai.chat.completions.create({ model, messages, ...bad }), e => {
      assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(bad)}: ${e}`);
      assert.equal(e.status, 400);
      assert.ok(e.error.message.length > 0);
      return true;
    }, JSON.stringify(bad));
  }
});

test('prompt + max_tokens over the context is a 400 that says so', async () => {
  const r = await raw('/v1/chat/completions', { body: { messages, max_tokens: 100000 } });
  openaiShape(r, 400, 'max_tokens');
  assert.match(r.json.error.message, /context/);
  const long = await raw('/v1/completions', { body: { prompt: 'ab '.repeat(1500) } });
  openaiShape(long, 400);
  assert.match(long.json.error.message, /context/);
});

test('unknown route 404, wrong method 405, body too large 413', async () => {
  openaiShape(await raw('/v1/nothing', { method: 'GET' }), 404);
  openaiShape(await raw('/v1/chat/completion', { body: { messages } }), 404);
  const m = await raw('/v1/chat/completions', { method: 'GET' });
  openaiShape(m, 405);
  assert.equal(m.headers.get('allow'), 'POST');
  openaiShape(await raw('/v1/models', { method: 'POST', body: {} }), 405);
  const big = await raw('/v1/chat/completions', {
    body: { messages: [{ role: 'user', content: 'x'.repeat(200000) }] },
  });
  openaiShape(big, 413);
  const anthropicBig = await raw('/v1/messages', {
    body: { max_tokens: 1, messages: [{ role: 'user', content: 'x'.repeat(200000) }] },
  });
  assert.equal(anthropicBig.status, 413);
  assert.equal(anthropicBig.json.type, 'error');
  assert.equal(anthropicBig.json.error.type, 'request_too_large');
});

test('a wrong or missing key is a 401 (Bearer and x-api-key)', { skip: !process.env.RINGLM_API_KEY },
     async () => {
  const none = await raw('/v1/chat/completions', { body: { messages }, headers: { Authorization: '' } });
  openaiShape(none, 401);
  const wrong = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), OpenAI.AuthenticationError);
  await assert.rejects(wrong.chat.completions.create({ model, messages }),
                       OpenAI.AuthenticationError);
  const wrongA = new Anthropic({ baseURL: url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(wrongA.messages.create({ model, max_tokens: 1, messages }), e => {
    assert.ok(e instanceof Anthropic.AuthenticationError, String(e));
    assert.equal(e.error.type, 'error');
    assert.equal(e.error.error.type, 'authentication_error');
    return true;
  });
  // x-api-key works on every route.
  const ok = await raw('/v1/models', { method: 'GET', headers: { Authorization: '', 'x-api-key': apiKey } });
  assert.equal(ok.status, 200);
  // /health, /metrics and the page need no key.
  assert.equal((await fetch(`${url}/health`)).status, 200);
  assert.equal((await fetch(`${url}/metrics`)).status, 200);
});

test('anthropic errors have the Anthropic shape', async () => {
  await assert.rejects(anthropic.messages.create({ model, max_tokens: 1, temperature: 1.5, messages }),
                       e => {
    assert.ok(e instanceof Anthropic.BadRequestError, String(e));
    assert.equal(e.error.type, 'error');
    assert.equal(e.error.error.type, 'invalid_request_error');
    assert.match(e.error.error.message, /temperature/);
    return true;
  });
  const r = await raw('/v1/messages', { body: { messages } });
  assert.equal(r.status, 400);
  assert.deepEqual(Object.keys(r.json), ['type', 'error']);
  assert.match(r.json.error.message, /max_tokens/);
});

test('metrics count requests by status', async () => {
  const text = await (await fetch(`${url}/metrics`)).text();
  assert.match(text, /^ringlm_requests_total\{status="400"\} [1-9]/m);
  assert.match(text, /^ringlm_requests_total\{status="404"\} [1-9]/m);
  for (const name of ['ringlm_kv_blocks_free', 'ringlm_requests_waiting',
                      'ringlm_prefix_cache_queries_total', 'ringlm_prompt_tokens_total'])
    assert.match(text, new RegExp(`^${name} \\d`, 'm'));
});
