import type { FastifyInstance } from 'fastify';
import { listPurchases } from '../../db/accounts-repository.js';
import { usageByDay } from '../../db/console-reads.js';
import { getBalance } from '../../db/credits-repository.js';
import { format, sendPage } from '../render.js';
import { creditsChart, outcomeLegend, outcomesChart } from '../usage-chart.js';
import type { ConsoleRouteDeps } from '../route-deps.js';
import { userOf } from '../request-fields.js';

/** The overview: balance by pool (in the order they are spent), purchases, and the last 30 days. */
export function overviewRoutes(app: FastifyInstance, deps: ConsoleRouteDeps): void {
  app.get('/', async (request, reply) => {
    const { accountId } = userOf(request);
    const [balance, purchases, days] = await Promise.all([
      getBalance(deps.db, accountId),
      listPurchases(deps.db, accountId),
      usageByDay(deps.db, accountId, 30),
    ]);
    return sendPage(request, reply, 'overview', {
      title: 'Overview',
      balance,
      purchases,
      creditsChart: creditsChart(days),
      outcomesChart: outcomesChart(days),
      legend: outcomeLegend,
      spent30: days.reduce((sum, d) => sum + d.credits, 0),
      made30: days.reduce((sum, d) => sum + Object.values(d.outcomes).reduce((a, b) => a + b, 0), 0),
      format,
    });
  });
}
