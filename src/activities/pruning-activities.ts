import { Context } from '@temporalio/activity';
import { CONSOLE_SESSION_IDLE_MS, pruneConsoleRecords } from '../db/console-sessions.js';
import { pruneKeyRecords, pruneRejectedGenerations, pruneRequestLog } from '../db/pruning-repository.js';
import { pruneSimulatedJobs } from '../providers/simulated/simulated-provider.js';
import type { PruningActivities, PruningOptions, PruningReport } from '../workflows/contracts/pruning.js';
import type { ActivityDeps } from './activity-deps.js';

type Table = Exclude<keyof PruningReport, 'unfinished'>;

/**
 * The pruning run: table by table, delete statements of `batchSize` rows until one deletes fewer
 * (nothing more is due) or `maxBatches` have run (the rest waits for the next run, and the report
 * says so). A retention of 0 keeps that table whole.
 */
export function createPruningActivities(deps: Pick<ActivityDeps, 'db'>): PruningActivities {
  const { db } = deps;
  return {
    async pruneRecords(options: PruningOptions): Promise<PruningReport> {
      // Key records go once past their horizon; the others after their retention, if they have one.
      const steps: Array<[Table, boolean, (limit: number) => Promise<number>]> = [
        ['keyRecords', true, (limit) => pruneKeyRecords(db, limit)],
        [
          'requestLog',
          options.requestLogRetentionMs > 0,
          (limit) => pruneRequestLog(db, options.requestLogRetentionMs, limit),
        ],
        [
          'rejectedGenerations',
          options.rejectedRetentionMs > 0,
          (limit) => pruneRejectedGenerations(db, options.rejectedRetentionMs, limit),
        ],
        [
          'simProviderJobs',
          options.simProviderJobRetentionMs > 0,
          (limit) => pruneSimulatedJobs(db, options.simProviderJobRetentionMs, limit),
        ],
        // Idle console sessions, expired sign-in links, once-only form marks a day old: always due.
        ['consoleRecords', true, (limit) => pruneConsoleRecords(db, CONSOLE_SESSION_IDLE_MS, limit)],
      ];
      const report: PruningReport = {
        requestLog: 0,
        rejectedGenerations: 0,
        keyRecords: 0,
        simProviderJobs: 0,
        consoleRecords: 0,
        unfinished: [],
      };
      for (const [table, due, prune] of steps) {
        if (!due) continue;
        for (let batch = 1; ; batch++) {
          const deleted = await prune(options.batchSize);
          report[table] += deleted;
          Context.current().heartbeat({ table, deleted: report[table] });
          if (deleted < options.batchSize) break;
          if (batch >= options.maxBatches) {
            report.unfinished.push(table);
            break;
          }
        }
      }
      return report;
    },
  };
}
