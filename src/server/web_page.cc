#include "server/web_page.h"

namespace ringlm::server {

namespace {

constexpr std::string_view kPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>ringlm chat</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 0; display: flex; flex-direction: column;
         height: 100vh; background: #fafafa; }
  header { padding: 8px 16px; background: #222; color: #eee; font-size: 14px; }
  #log { flex: 1; overflow-y: auto; padding: 16px; }
  .msg { white-space: pre-wrap; margin: 8px 0; padding: 8px 12px; border-radius: 8px;
         max-width: 80ch; }
  .user { background: #dbeafe; margin-left: auto; }
  .assistant { background: #fff; border: 1px solid #ddd; }
  .error { background: #fee2e2; }
  form { display: flex; gap: 8px; padding: 12px; border-top: 1px solid #ddd; }
  textarea { flex: 1; height: 3em; font: inherit; }
  header label { float: right; margin-left: 12px; }
  /* A reply that ended before any text (e.g. the model's end token first) says so. */
  .assistant[data-done="true"]:empty::after { content: '(empty reply)'; color: #888; }
</style>
</head>
<body>
<header>ringlm &middot; <span id="model">?</span>
  <label>max tokens <input id="max" type="number" value="256" min="1" style="width:6em"></label>
  <!-- Empty: the API's default, 1; 0 = greedy (the same reply every time). -->
  <label>temperature <input id="temperature" type="number" min="0" max="2" step="0.1"
    placeholder="default" style="width:6em"></label></header>
<div id="log"></div>
<form id="form">
  <textarea id="input" placeholder="Message (Enter to send, Shift+Enter for a new line)"></textarea>
  <button id="send" type="submit">Send</button>
</form>
<script>
const log = document.getElementById('log');
const input = document.getElementById('input');
const send = document.getElementById('send');
const history = [];
let model = '';
// With `ringlm serve --api-key`, the page asks for the key once and keeps it in localStorage.
let apiKey = localStorage.getItem('ringlm-api-key') || '';
const authHeaders = () => (apiKey ? { Authorization: 'Bearer ' + apiKey } : {});
async function authorizedFetch(url, init = {}) {
  for (let attempt = 0; ; ++attempt) {
    const r = await fetch(url, { ...init, headers: { ...(init.headers || {}), ...authHeaders() } });
    if (r.status !== 401 || attempt > 0) return r;
    apiKey = prompt('API key') || '';
    localStorage.setItem('ringlm-api-key', apiKey);
  }
}

authorizedFetch('/v1/models').then(r => r.json()).then(j => {
  model = j.data[0].id;
  document.getElementById('model').textContent = model;
}).catch(() => {});

function bubble(role, text) {
  const div = document.createElement('div');
  div.className = 'msg ' + role;
  div.textContent = text;
  log.appendChild(div);
  log.scrollTop = log.scrollHeight;
  return div;
}

// Reads an SSE stream: events are separated by a blank line; "data: " lines carry JSON.
async function* sseData(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of block.split('\n')) {
        if (line.startsWith('data: ')) yield line.slice(6);
      }
    }
  }
}

function requestBody() {
  const body = { model, messages: history, stream: true,
                 max_tokens: Number(document.getElementById('max').value) };
  const temperature = document.getElementById('temperature').value;
  if (temperature !== '') body.temperature = Number(temperature);
  return body;
}

async function chat(text) {
  history.push({ role: 'user', content: text });
  bubble('user', text);
  const out = bubble('assistant', '');
  send.disabled = true;
  let reply = '';
  try {
    const response = await authorizedFetch('/v1/chat/completions', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(requestBody()),
    });
    if (!response.ok) {
      const err = await response.json().catch(() => ({}));
      throw new Error((err.error && err.error.message) || response.statusText);
    }
    for await (const data of sseData(response)) {
      if (data === '[DONE]') break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      const delta = chunk.choices.length ? chunk.choices[0].delta : null;
      if (delta && delta.content) {
        reply += delta.content;
        out.textContent = reply;
        log.scrollTop = log.scrollHeight;
      }
    }
    history.push({ role: 'assistant', content: reply });
    out.dataset.done = 'true';
  } catch (e) {
    out.className = 'msg error';
    out.textContent = 'error: ' + e.message;
    history.pop();
  } finally {
    send.disabled = false;
  }
}

document.getElementById('form').addEventListener('submit', e => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text || send.disabled) return;
  input.value = '';
  chat(text);
});
input.addEventListener('keydown', e => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    document.getElementById('form').requestSubmit();
  }
});
</script>
</body>
</html>
)HTML";

}  // namespace

std::string_view web_page_html() {
  return kPage;
}

}  // namespace ringlm::server
