// The official OpenAI and Anthropic clients against `ringlm serve` on the server fixture model
// (tiny random weights: texts are arbitrary but deterministic under greedy decoding).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  openai, anthropic, model, noEos, lettersOnly, TOOL_CALL_TOKEN, raw, waitIdle,
} from './util.mjs';

const hello = [{ role: 'user', content: 'Say something.' }];
const greedy = { model, temperature: 0, logit_bias: noEos };

async function chatText(params) {
  const r = await openai.chat.completions.create({ ...greedy, messages: hello, ...params });
  return r.choices[0].message.content;
}

async function streamChat(params) {
  const stream = await openai.chat.completions.create({
    ...greedy, messages: hello, stream: true, stream_options: { include_usage: true }, ...params,
  });
  const out = { text: {}, finish: {}, usage: null, chunks: 0, toolCalls: [] };
  for await (const chunk of stream) {
    ++out.chunks;
    if (chunk.usage) out.usage = chunk.usage;
    for (const c of chunk.choices) {
      out.text[c.index] = (out.text[c.index] ?? '') + (c.delta.content ?? '');
      if (c.delta.tool_calls) out.toolCalls.push(...c.delta.tool_calls);
      if (c.finish_reason) out.finish[c.index] = c.finish_reason;
    }
  }
  return out;
}

test('models lists the served model', async () => {
  const list = await openai.models.list();
  assert.deepEqual(list.data.map(m => m.id), [model]);
});

test('chat: non-streamed, length finish and usage', async () => {
  const r = await openai.chat.completions.create({ ...greedy, messages: hello, max_tokens: 8 });
  assert.equal(r.object, 'chat.completion');
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.usage.completion_tokens, 8);
  assert.ok(r.usage.prompt_tokens > 10);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 8);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('chat: streamed text equals the non-streamed text; usage chunk', async () => {
  const whole = await chatText({ max_tokens: 12 });
  const s = await streamChat({ max_tokens: 12 });
  assert.equal(s.text[0], whole);
  assert.equal(s.finish[0], 'length');
  assert.equal(s.usage.completion_tokens, 12);
  assert.ok(s.chunks >= 3, `only ${s.chunks} chunks`);
  // max_completion_tokens is the same limit.
  assert.equal(await chatText({ max_completion_tokens: 12 }), whole);
});

test('completions: streamed equals non-streamed; token-id prompts', async () => {
  const params = { model, prompt: 'the weather', max_tokens: 10, temperature: 0, logit_bias: noEos };
  const r = await openai.completions.create(params);
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices[0].finish_reason, 'length');
  let streamed = '';
  for await (const c of await openai.completions.create({ ...params, stream: true }))
    streamed += c.choices[0]?.text ?? '';
  assert.equal(streamed, r.choices[0].text);
  const ids = await openai.completions.create({ ...params, prompt: [116, 104, 101] });
  assert.equal(ids.usage.prompt_tokens, 3);
});

test('stop strings that span token boundaries', async () => {
  const base = { ...greedy, logit_bias: lettersOnly, max_tokens: 40 };
  const full = await chatText(base);
  assert.match(full, /^[a-z]{40,80}$/);
  for (const [from, len] of [[9, 3], [20, 2], [31, 5]]) {
    const stop = full.slice(from, from + len);
    const expected = full.slice(0, full.indexOf(stop));
    const r = await openai.chat.completions.create({ ...base, messages: hello, stop: [stop, 'QQ'] });
    assert.equal(r.choices[0].message.content, expected, `stop ${stop}`);
    assert.equal(r.choices[0].finish_reason, 'stop');
    const s = await streamChat({ ...base, stop });
    assert.equal(s.text[0], expected, `streamed, stop ${stop}`);
    assert.equal(s.finish[0], 'stop');
  }
});

test('logprobs: chat top_logprobs and completions logprobs', async () => {
  const r = await openai.chat.completions.create({
    ...greedy, messages: hello, logit_bias: lettersOnly, max_tokens: 6, logprobs: true,
    top_logprobs: 3,
  });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, 6);
  assert.equal(content.map(t => t.token).join(''), r.choices[0].message.content);
  for (const t of content) {
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.logprob <= 0);
    // Greedy: the chosen token is the most likely one.
    assert.equal(t.top_logprobs[0].token, t.token);
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
    assert.deepEqual(t.bytes, [...Buffer.from(t.token)]);
  }
  const c = await openai.completions.create({
    model, prompt: 'abc', max_tokens: 5, temperature: 0, logit_bias: lettersOnly, logprobs: 2,
  });
  const lp = c.choices[0].logprobs;
  assert.equal(lp.tokens.length, 5);
  assert.equal(lp.tokens.join(''), c.choices[0].text);
  assert.equal(lp.top_logprobs[0][lp.tokens[0]], lp.token_logprobs[0]);
  assert.equal(Object.keys(lp.top_logprobs[0]).length, 2);
  assert.deepEqual(lp.text_offset.slice(0, 2), [0, lp.tokens[0].length]);
});

test('n > 1 and seeds', async () => {
  const params = { model, messages: hello, temperature: 1, max_tokens: 16, logit_bias: noEos };
  const a = await openai.chat.completions.create({ ...params, n: 3, seed: 11 });
  assert.deepEqual(a.choices.map(c => c.index), [0, 1, 2]);
  assert.equal(a.usage.completion_tokens, 48);
  const b = await openai.chat.completions.create({ ...params, n: 3, seed: 11 });
  assert.deepEqual(b.choices.map(c => c.message.content), a.choices.map(c => c.message.content));
  const one = await chatText({ ...params, seed: 5 });
  assert.equal(await chatText({ ...params, seed: 5 }), one);
  assert.notEqual(await chatText({ ...params, seed: 6 }), one);
  const s = await streamChat({ ...params, n: 2, seed: 11 });
  assert.deepEqual(Object.keys(s.text).sort(), ['0', '1']);
  assert.equal(s.usage.completion_tokens, 32);
});

const tools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } } },
  },
}];
// The fixture's token 305 is a whole Hermes tool call; forcing it makes the model "call" it.
const forceCall = { [String(TOOL_CALL_TOKEN)]: 100 };

test('tools: a forced call parses back to tool_calls, and the round trip renders', async () => {
  const r = await openai.chat.completions.create({
    model, messages: [{ role: 'user', content: 'Weather in Paris?' }], tools, temperature: 0,
    logit_bias: forceCall, max_tokens: 1,
  });
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.function.arguments), { city: 'Paris' });
  const next = await openai.chat.completions.create({
    ...greedy, tools, max_tokens: 4,
    messages: [{ role: 'user', content: 'Weather in Paris?' }, choice.message,
               { role: 'tool', tool_call_id: call.id, content: 'sunny' }],
  });
  assert.equal(next.choices[0].finish_reason, 'length');
  // Without tools the same output is plain text.
  const plain = await openai.chat.completions.create({
    model, messages: hello, temperature: 0, logit_bias: forceCall, max_tokens: 1,
  });
  assert.match(plain.choices[0].message.content, /^<tool_call>/);
  // Streamed: one tool_calls delta.
  const s = await streamChat({ tools, logit_bias: forceCall, max_tokens: 1 });
  assert.equal(s.finish[0], 'tool_calls');
  assert.equal(s.toolCalls.length, 1);
  assert.equal(s.toolCalls[0].function.name, 'get_weather');
  assert.equal(s.text[0], '');
});

test('anthropic: messages, streaming events, stop sequences, tool use', async () => {
  const params = {
    model, max_tokens: 10, temperature: 0, messages: [{ role: 'user', content: 'Hi' }],
  };
  const m = await anthropic.messages.create(params);
  assert.equal(m.type, 'message');
  assert.match(m.id, /^msg_/);
  assert.equal(m.content[0].type, 'text');
  assert.ok(m.usage.input_tokens > 0);
  assert.ok(['max_tokens', 'end_turn'].includes(m.stop_reason));
  const events = [];
  const stream = anthropic.messages.stream(params);
  stream.on('streamEvent', e => events.push(e.type));
  const final = await stream.finalMessage();
  assert.equal(final.content[0].text, m.content[0].text);
  assert.equal(final.stop_reason, m.stop_reason);
  assert.equal(final.usage.output_tokens, m.usage.output_tokens);
  assert.equal(events[0], 'message_start');
  assert.equal(events.at(-1), 'message_stop');
  assert.ok(events.includes('content_block_delta'));

  // Stop on what greedy decoding writes anyway.
  const plain = await anthropic.messages.create({ ...params, max_tokens: 30, logit_bias: noEos });
  const full = plain.content[0].text;
  assert.equal(plain.stop_reason, 'max_tokens');
  const stop = [...full].slice(3, 6).join('');
  const s = await anthropic.messages.create({
    ...params, max_tokens: 30, logit_bias: noEos, stop_sequences: [stop],
  });
  assert.equal(s.stop_reason, 'stop_sequence');
  assert.equal(s.stop_sequence, stop);
  assert.equal(s.content[0].text, full.slice(0, full.indexOf(stop)));

  const anthropicTools = [{ name: 'get_weather', input_schema: { type: 'object' } }];
  // logit_bias is a ringlm extension of the Messages API; it forces the fixture's tool call.
  const forced = { ...params, tools: anthropicTools, max_tokens: 1, logit_bias: forceCall };
  const t = await anthropic.messages.create(forced);
  assert.equal(t.stop_reason, 'tool_use');
  const use = t.content.find(b => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.deepEqual(use.input, { city: 'Paris' });
  const ts = await anthropic.messages.stream(forced).finalMessage();
  assert.equal(ts.stop_reason, 'tool_use');
  assert.deepEqual(ts.content.find(b => b.type === 'tool_use').input, { city: 'Paris' });
  const round = await anthropic.messages.create({
    ...params, tools: anthropicTools,
    messages: [
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] },
    ],
  });
  assert.equal(round.type, 'message');
});

test('a client that disconnects mid-stream gets its request cancelled and KV freed', async () => {
  const before = await waitIdle();
  const controller = new AbortController();
  const stream = await openai.chat.completions.create(
    { ...greedy, messages: hello, max_tokens: 900, stream: true }, { signal: controller.signal });
  let chunks = 0;
  // Abort after 5 chunks and stop reading (chunks already buffered by the client could still be
  // yielded after the abort: the CI once saw 11).
  for await (const _ of stream) {
    if (++chunks === 5) {
      controller.abort();
      break;
    }
  }
  const m = await waitIdle();
  assert.equal(m.value('ringlm_kv_blocks_used'), 0, m.text);
  assert.equal(m.value('ringlm_requests_running'), 0, m.text);
  // The server noticed and cancelled: fewer than the 900 tokens asked for were generated.
  assert.equal(m.value('ringlm_client_disconnects_total'),
               before.value('ringlm_client_disconnects_total') + 1, m.text);
  const generated = m.value('ringlm_generation_tokens_total') -
                    before.value('ringlm_generation_tokens_total');
  assert.ok(generated < 900, `${generated} tokens generated after the client left`);
  assert.ok(m.value('ringlm_engine_steps_total') > before.value('ringlm_engine_steps_total'),
            m.text);
  assert.ok(m.value('ringlm_engine_step_wait_seconds_total') > 0, m.text);
});
