import { sql } from 'slonik';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createPaidAccount } from '../support/api.js';
import { expectAccessible, signIn, useConsole } from '../support/console.js';
import { cookiesOf, inputValue, signInOverHttp } from '../support/console-http.js';
import { createGeneration, pollGeneration } from '../support/generations.js';
import { chargesOf } from '../support/ledger.js';
import { useGenerationStack } from '../support/stack.js';
import { useWebhookReceiver } from '../support/webhook-receiver.js';

/**
 * A generation's webhook deliveries on its console page, and the owner's redeliver button (issue 30
 * §3), through a real worker to an HTTPS receiver on loopback (allowed as WEBHOOK_ALLOW_CIDRS would).
 */
describe('console: webhook deliveries', () => {
  const receiver = useWebhookReceiver();
  const stack = useGenerationStack({
    account: { oneTime: 100 },
    apiEnv: receiver.env,
    worker: { overrides: { webhookDelivery: receiver.webhookDelivery } },
  });
  const consoleUi = useConsole(stack, receiver.env);
  const deliveriesOf = (id: string) => receiver.deliveriesOf(id);
  const balance = () =>
    stack.db.pool.oneFirst(sql.type(z.object({ one_time_credits: z.number() }))`
      SELECT one_time_credits FROM credit_balances WHERE account_id = ${stack.account.accountId}`);

  it('shows each attempt (event, URL, attempt, status, latency, error, time) and redelivers one event for nothing', async () => {
    receiver.answers.push(500);
    const url = `${receiver.origin}/hooks?console`;
    const created = await createGeneration(stack.api, stack.account.key, {
      model: 'lumen-lite',
      prompt: 'a lighthouse',
      webhook: { url },
    });
    expect(created.statusCode, created.body).toBe(202);
    const id = z.object({ id: z.string() }).parse(created.json()).id;
    await pollGeneration(stack.api, stack.account.key, id, (g) => g.status === 'succeeded');
    await expect.poll(() => deliveriesOf(id).length, { timeout: 20_000 }).toBe(2);

    const { context, page } = await consoleUi.newPage();
    await signIn(page, stack.account.key);
    await page.goto(`/generations/${id}`);
    const section = page.locator('[data-webhook-deliveries]');
    await expect.poll(() => section.locator('tbody tr').count()).toBe(2);
    const rows = await section.locator('tbody tr').allInnerTexts();
    expect(rows[0]).toContain('generation.succeeded');
    expect(rows[0]).toContain(url);
    expect(rows[0]).toMatch(/\t1\tfailed \(500\)\t\d+ ms\tthe receiver answered 500\t\d{4}-\d\d-\d\d /);
    expect(rows[1]).toMatch(/\t2\tdelivered \(204\)\t\d+ ms\t—\t\d{4}-\d\d-\d\d /);
    await expectAccessible(page);

    const before = { balance: await balance(), charges: await chargesOf(stack.db.pool, id) };
    const seq = await section.locator('[data-delivery-event]').first().getAttribute('data-delivery-event');
    await page.getByLabel('Event').selectOption(seq ?? '');
    await page.getByRole('button', { name: 'Redeliver' }).click();
    await page.waitForURL(`**/generations/${id}?redelivered=${seq}`);
    await expect.poll(() => page.getByRole('status').textContent()).toContain(`Event ${seq}`);
    await expect.poll(() => deliveriesOf(id).length, { timeout: 20_000 }).toBe(3);
    // The same message again: one webhook-id for every delivery of the event.
    expect(new Set(deliveriesOf(id).map((d) => d.webhookId))).toEqual(new Set([`msg_${id}_${seq}`]));
    await expect
      .poll(async () => {
        await page.reload();
        return section.locator('tbody tr').count();
      })
      .toBe(3);
    expect(await section.locator('tbody tr').last().innerText()).toMatch(/\t3\tdelivered \(204\)/);
    expect(await balance()).toBe(before.balance);
    expect(await chargesOf(stack.db.pool, id)).toEqual(before.charges);
    await context.close();
  });

  it('redelivers only with the session’s form token, only the owner’s generation, only a listed event', async () => {
    const made = async (key: string) => {
      const response = await createGeneration(stack.api, key, {
        model: 'lumen-lite',
        prompt: 'a harbour',
        webhook: { url: `${receiver.origin}/hooks?guarded` },
      });
      const id = z.object({ id: z.string() }).parse(response.json()).id;
      await pollGeneration(stack.api, key, id, (g) => g.status === 'succeeded');
      await expect.poll(() => deliveriesOf(id).length, { timeout: 20_000 }).toBe(1);
      return id;
    };
    const other = await createPaidAccount(stack.db.pool, { oneTime: 100 });
    const mine = await made(stack.account.key);
    const theirs = await made(other.key);
    const session = await signInOverHttp(consoleUi.url, stack.account.key);
    const page = await fetch(`${consoleUi.url}/generations/${mine}`, { headers: { cookie: session.cookie } });
    const cookie = cookiesOf(page, session.cookie);
    const csrf = inputValue(await page.text(), '_csrf');
    const post = (id: string, form: Record<string, string>) =>
      fetch(`${consoleUi.url}/generations/${id}/webhooks/redeliver`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(form).toString(),
      });
    const seq = await stack.db.pool.oneFirst(sql.type(z.object({ seq: z.number() }))`
      SELECT seq FROM generation_events WHERE generation_id = ${mine} AND type = 'generation.succeeded'`);

    expect((await post(mine, { event: String(seq) })).status).toBe(403);
    expect((await post(mine, { event: String(seq), _csrf: 'x'.repeat(43) })).status).toBe(403);
    expect((await post(theirs, { event: String(seq), _csrf: csrf })).status).toBe(404);
    for (const event of ['', 'abc', '999', '1']) {
      // 1 is generation.created: in the log, but not an event this webhook is sent.
      const refused = await post(mine, { event, _csrf: csrf });
      expect(refused.status, event).toBe(400);
      expect(await refused.text()).toContain('Choose one of the events listed');
    }
    const unsigned = await fetch(`${consoleUi.url}/generations/${mine}/webhooks/redeliver`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ event: String(seq) }).toString(),
    });
    expect(unsigned.status).toBe(401);
    await new Promise((r) => setTimeout(r, 1500)); // time for a wrongly queued delivery to arrive
    expect(deliveriesOf(mine)).toHaveLength(1);
    expect(deliveriesOf(theirs)).toHaveLength(1);

    const accepted = await post(mine, { event: String(seq), _csrf: csrf });
    expect(accepted.status).toBe(303);
    expect(accepted.headers.get('location')).toBe(`/generations/${mine}?redelivered=${seq}`);
    await expect.poll(() => deliveriesOf(mine).length, { timeout: 20_000 }).toBe(2);
  });
});
