import { sql, type CommonQueryMethods } from 'slonik';
import { z } from 'zod';
import { randomBase62 } from '../../vocabulary/ids.js';
import {
  ProviderRejection,
  ProviderTransientError,
  ProviderUncertainError,
  type Provider,
  type ProviderJob,
  type ProviderResult,
  type ProviderStatus,
  type StopAnswer,
} from '../provider.js';
import { parseSimDirectives, stripSimDirectives, type SimDirectives } from './prompt-directives.js';
import type { Storage } from '../../storage/storage.js';
import { inProcessRenderer, type SimRenderer } from './renderer.js';
import { outputSize } from './output-size.js';
import type { FrameFetchPolicy, FrameSource } from './video-drawing.js';

const jobRow = z.object({
  job_id: z.string(),
  media_type: z.enum(['image', 'video']),
  prompt: z.string(),
  options: z.record(z.string(), z.unknown()),
  images: z.array(z.string()),
  long_edge_px: z.number(),
  directives: z.custom<SimDirectives>(),
  ready: z.boolean(),
});
type JobRow = z.infer<typeof jobRow>;
const jobColumns = sql.fragment`job_id, media_type, prompt, options, images, long_edge_px, directives, ready_at <= now() AS ready`;

const fetchResultRow = jobRow.extend({ download_fails: z.boolean() });

const stopBeforeRunRow = z.object({ job_id: z.string() });

const lookupRow = z.object({ job_id: z.string(), directives: z.custom<SimDirectives>() });

const submitRow = z.object({ job_id: z.string() });

/** How long after a job's ready time its push goes: past the clock skew between this process and PostgreSQL. */
const pushMarginMs = 25;

/**
 * The embedded default provider: it makes real image files (and, for video
 * models, real MP4 files) after a realistic delay, and
 * keeps its jobs in its own table like an external service would. Prompt
 * directives (see prompt-directives.ts) drive every failure path.
 */
export class SimulatedProvider implements Provider {
  constructor(
    private readonly db: CommonQueryMethods,
    private readonly options: {
      delayMs: number;
      /** Makes the pictures and videos; by default in this process (see renderer.ts). */
      renderer?: SimRenderer;
      /** Our storage: input images on our result host are read from it, not fetched. */
      storage?: Storage;
      /** What the renderer's frame fetches may reach besides public HTTPS addresses. */
      frameFetch?: FrameFetchPolicy;
      /**
       * Pushes a job's end to its generation (signalSimulatedJobEnded), as a real provider's
       * webhook does: called when the job is ready. Absent: the jobs are polled.
       */
      push?: (to: { generationId: string; workflowId: string }, jobId: string) => Promise<void>;
    },
  ) {}

  /** With `push`, every job's end is pushed to its generation: its wait reads it then (and on a slow fallback). */
  get pushes(): boolean {
    return this.options.push !== undefined;
  }
  get pushesWithoutUrl(): boolean {
    return this.pushes;
  }
  get expectedRunMs(): number {
    return this.options.delayMs;
  }

  private get renderer(): SimRenderer {
    return (this.options.renderer ??= inProcessRenderer);
  }

  async submit(job: ProviderJob): Promise<{ jobId: string }> {
    const directives = parseSimDirectives(job.prompt);
    if (directives.unreachable)
      throw new ProviderTransientError('The provider refused the connection; nothing was sent (simulated).');
    if (directives.reject) throw new ProviderRejection('The provider rejected the request (simulated).');
    const delayMs = directives.slowSeconds !== null ? directives.slowSeconds * 1000 : this.options.delayMs;
    const jobId = await this.db.oneFirst(sql.type(submitRow)`
      INSERT INTO sim_provider_jobs (token, job_id, model, media_type, prompt, options, images, long_edge_px, directives, fetch_failures_left, ready_at)
      VALUES (${job.token}, ${`sim_${randomBase62(20)}`}, ${job.model}, ${job.mediaType}, ${job.prompt},
              ${sql.jsonb(job.options as Record<string, string | number | boolean | null>)}, ${sql.jsonb(job.images)}, ${job.longEdgePx},
              ${sql.jsonb(directives as unknown as Record<string, string | number | boolean | null>)}, ${directives.persistFailures},
              now() + ${sql.interval({ seconds: (directives.queuedSeconds * 1000 + delayMs) / 1000 })})
      ON CONFLICT (token) DO UPDATE SET submissions = sim_provider_jobs.submissions + 1
      RETURNING job_id`);
    this.pushWhenReady(job, jobId, directives.queuedSeconds * 1000 + delayMs);
    if (directives.uncertain)
      throw new ProviderUncertainError('The submit was sent but its answer was lost (simulated).');
    return { jobId };
  }

  /**
   * The job's end pushed to its generation once it is ready (a little after ready_at, which
   * PostgreSQL's clock set). A worker that stops first loses the push, as a lost webhook is lost:
   * the wait's fallback read finds the job ended.
   */
  private pushWhenReady(job: ProviderJob, jobId: string, readyInMs: number): void {
    const { push } = this.options;
    const { generationId, workflowId } = job;
    if (!push || !generationId || !workflowId) return;
    setTimeout(() => void push({ generationId, workflowId }, jobId), readyInMs + pushMarginMs).unref();
  }

  async lookup(
    token: string,
  ): Promise<{ found: true; jobId: string } | { found: false } | { found: 'unknown' }> {
    const row = await this.db.maybeOne(sql.type(lookupRow)`
      SELECT job_id, directives FROM sim_provider_jobs WHERE token = ${token}`);
    if (!row) return { found: false };
    if (row.directives.uncertain === 'unresolvable') return { found: 'unknown' };
    return { found: true, jobId: row.job_id };
  }

  /** The simulated provider's jobs end on their own and cost nothing: there is nothing to stop. */
  async cancel(): Promise<void> {}

  /**
   * A job still in the simulated queue (`[sim:queued=SECONDS]`, counted from its submission) is
   * marked canceled and never runs; once it has left the queue it runs on, and nothing changes.
   */
  async stopBeforeRun(jobId: string): Promise<StopAnswer> {
    const stopped = await this.db.maybeOne(sql.type(stopBeforeRunRow)`
      UPDATE sim_provider_jobs SET directives = directives || '{"canceled": true}'::jsonb
      WHERE job_id = ${jobId} AND (directives->>'canceled' = 'true'
        OR submitted_at + make_interval(secs => coalesce((directives->>'queuedSeconds')::float8, 0)) > now())
      RETURNING job_id`);
    return { stopped: stopped !== null };
  }

  async status(jobId: string): Promise<ProviderStatus> {
    const job = await this.job(jobId);
    if (job.directives.canceled)
      return { state: 'failed', message: 'The job was canceled before it ran (simulated).' };
    if (!job.ready) return { state: 'running' };
    if (job.directives.fail)
      return { state: 'failed', message: 'The model failed to generate an output (simulated).' };
    return { state: 'succeeded', results: [this.result(job)] };
  }

  async fetchResult(jobId: string, index: number): Promise<{ bytes: Buffer; contentType: string }> {
    if (index !== 0) throw new Error(`job ${jobId} has one result`);
    // One round trip: the job, and whether this download is one of the [sim:persist-fail=N] failures.
    const job = await this.db.maybeOne(sql.type(fetchResultRow)`
      WITH failed AS (
        UPDATE sim_provider_jobs SET fetch_failures_left = fetch_failures_left - 1
        WHERE job_id = ${jobId} AND fetch_failures_left > 0 RETURNING job_id
      )
      SELECT ${jobColumns}, EXISTS (SELECT FROM failed) AS download_fails
      FROM sim_provider_jobs WHERE job_id = ${jobId}`);
    if (!job) throw new Error(`no simulated job ${jobId}`);
    if (job.download_fails) throw new ProviderTransientError('The result download failed (simulated).');
    const result = this.result(job);
    const prompt = stripSimDirectives(job.prompt) || job.prompt;
    if (job.media_type === 'video') {
      const urls = [job.options.first_frame_image, job.options.last_frame_image].filter(
        (f): f is string => typeof f === 'string',
      );
      const frames = await Promise.all(urls.map((url) => this.frameSource(url)));
      const bytes = await this.renderer.video({
        prompt,
        width: result.width,
        height: result.height,
        durationSeconds: result.durationSeconds ?? 4,
        audio: result.hasAudio ?? false,
        frames,
        ...(this.options.frameFetch ? { fetch: this.options.frameFetch } : {}),
      });
      return { bytes, contentType: 'video/mp4' };
    }
    const format = job.options.output_format === 'jpeg' ? 'jpeg' : 'png';
    return {
      bytes: await this.renderer.image(prompt, result.width, result.height, format),
      contentType: `image/${format}`,
    };
  }

  /**
   * A frame on our own result host (an inline image the API stored) is read
   * from storage here; any other URL is left for the renderer to fetch, under
   * the outbound fetcher's rules.
   */
  private async frameSource(url: string): Promise<FrameSource> {
    const storage = this.options.storage;
    const key = storage?.keyOf(url);
    if (!storage || !key) return { url };
    const bytes = await storage.read(key.prefix, key.name);
    return bytes ? { bytes } : { missing: true };
  }

  private async job(jobId: string): Promise<JobRow> {
    const job = await this.db.maybeOne(
      sql.type(jobRow)`SELECT ${jobColumns} FROM sim_provider_jobs WHERE job_id = ${jobId}`,
    );
    if (!job) throw new Error(`no simulated job ${jobId}`);
    return job;
  }

  private result(job: JobRow): ProviderResult {
    const { width, height } = outputSize(job.long_edge_px, job.options.aspect_ratio as string | undefined);
    if (job.media_type === 'video') {
      return {
        width,
        height,
        contentType: 'video/mp4',
        durationSeconds: Number(job.options.duration ?? 4),
        hasAudio: job.options.generate_audio === true,
      };
    }
    return { width, height, contentType: job.options.output_format === 'jpeg' ? 'image/jpeg' : 'image/png' };
  }
}

const pruneSimulatedJobsRow = z.object({ n: z.number() });

/**
 * The simulated provider forgets its jobs as a real one does: jobs submitted more than
 * `retentionMs` ago, at most `limit` of them (the pruning schedule calls it; see
 * src/activities/pruning-activities.ts). Returns how many it deleted.
 */
export function pruneSimulatedJobs(
  db: CommonQueryMethods,
  retentionMs: number,
  limit: number,
): Promise<number> {
  return db.oneFirst(sql.type(pruneSimulatedJobsRow)`
    WITH old AS (
      SELECT token FROM sim_provider_jobs
      WHERE submitted_at < now() - ${sql.interval({ seconds: retentionMs / 1000 })}
      ORDER BY submitted_at LIMIT ${limit}
    ), gone AS (DELETE FROM sim_provider_jobs j USING old WHERE j.token = old.token RETURNING 1)
    SELECT count(*)::int AS n FROM gone`);
}
