// The web chat page in headless Chromium (Debian's /usr/bin/chromium through playwright-core):
// type a message, send it, and watch the reply stream into the page.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { url } from './util.mjs';

const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';

test('the page streams a reply', { skip: !existsSync(executablePath) && 'no chromium' }, async () => {
  const browser = await chromium.launch({
    executablePath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await browser.newPage();
    await page.goto(url);
    await page.waitForFunction(() => document.getElementById('model').textContent !== '?');
    await page.fill('#max', '24');
    // Greedy: the fixture model's reply is then fixed. Sampled at the API's default temperature
    // it sometimes began with an end token, and the reply was empty (a CI failure).
    await page.fill('#temperature', '0');
    const bodies = [];
    page.on('request', r => {
      if (r.url().endsWith('/v1/chat/completions')) bodies.push(JSON.parse(r.postData()));
    });
    // Count the reply's distinct texts as it grows: streaming shows more than the final one.
    await page.evaluate(() => {
      window.replyStates = new Set();
      new MutationObserver(() => {
        const reply = document.querySelector('.assistant, .error');
        if (reply) window.replyStates.add(reply.textContent);
      }).observe(document.getElementById('log'), { childList: true, subtree: true,
                                                    characterData: true });
    });
    await page.fill('#input', 'Hello there');
    await page.press('#input', 'Enter');
    await page.waitForSelector('.assistant[data-done="true"], .error', { timeout: 60000 });
    assert.equal(await page.locator('.error').count(), 0,
                 await page.locator('.error').first().textContent().catch(() => ''));
    assert.equal(await page.locator('.user').textContent(), 'Hello there');
    assert.equal(bodies.length, 1);
    assert.equal(bodies[0].temperature, 0);
    assert.equal(bodies[0].max_tokens, 24);
    const reply = await page.locator('.assistant').textContent();
    const states = await page.evaluate(() => [...window.replyStates].filter(s => s.length > 0));
    assert.ok(reply.length > 0, 'empty reply');
    assert.ok(states.length >= 2, `the reply did not stream: ${JSON.stringify(states)}`);
    assert.equal(states.at(-1), reply);
  } finally {
    await browser.close();
  }
});
