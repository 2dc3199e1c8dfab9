import { readdir, readFile } from 'node:fs/promises';

/**
 * CPU time of the processes a bench started, and of nothing else on the machine: other people's
 * test runs start PostgreSQL and Temporal servers of their own, which a match on the command line
 * (pgrep -f postgres) would count as ours. A process is named by its PID and counted with its
 * descendants (PostgreSQL's backends, the simulated provider's renderer), read from /proc.
 */

interface ProcessEntry {
  pid: number;
  ppid: number;
  /** utime + stime + cutime + cstime, in clock ticks: its own CPU and its reaped children's. */
  ticks: number;
}

/** Linux's USER_HZ, which /proc/<pid>/stat counts in (100 on every architecture Node runs on). */
const ticksPerSecond = 100;

/** Every process on the machine, by PID. */
async function processTable(): Promise<Map<number, ProcessEntry>> {
  const table = new Map<number, ProcessEntry>();
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
  await Promise.all(
    pids.map(async (name) => {
      try {
        // The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
        const stat = await readFile(`/proc/${name}/stat`, 'utf8');
        const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const pid = Number(name);
        table.set(pid, {
          pid,
          ppid: Number(fields[1]),
          ticks: Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]),
        });
      } catch {
        // exited meanwhile
      }
    }),
  );
  return table;
}

/**
 * What one named figure counts: the tree of `pid` (the process and its descendants), less its
 * children whose command line contains `except` (counted under a name of their own); or, with
 * `matching`, only the trees of `pid`'s children whose command line contains it; or, with `own`,
 * the process alone (the bench's load generator, whose children are the stack it measures).
 * An undefined `pid` counts 0 (an external server the bench did not start).
 */
export interface CpuSource {
  pid: number | undefined;
  except?: string;
  matching?: string;
  own?: boolean;
}

/**
 * CPU milliseconds used so far by each named source. A descendant that exited and was reaped is
 * in its parent's cutime/cstime, so the sum over a live tree keeps every process that ever ran in it.
 */
export async function cpuBySource<Name extends string>(
  sources: Record<Name, CpuSource>,
): Promise<Record<Name, number>> {
  const table = await processTable();
  const children = new Map<number, number[]>();
  for (const entry of table.values()) {
    const list = children.get(entry.ppid) ?? [];
    list.push(entry.pid);
    children.set(entry.ppid, list);
  }
  const cmdline = (pid: number) => readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  const treeTicks = (root: number) => {
    let ticks = 0;
    const stack = [root];
    while (stack.length > 0) {
      const pid = stack.pop()!;
      ticks += table.get(pid)?.ticks ?? 0;
      stack.push(...(children.get(pid) ?? []));
    }
    return ticks;
  };
  const result = {} as Record<Name, number>;
  for (const [name, source] of Object.entries(sources) as Array<[Name, CpuSource]>) {
    const { pid } = source;
    let ticks = 0;
    if (pid === undefined || !table.has(pid)) ticks = 0;
    else if (source.own) {
      // Its own time only: utime + stime, without the children it reaped.
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks = Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
    } else if (source.matching !== undefined) {
      for (const child of children.get(pid) ?? [])
        if ((await cmdline(child)).includes(source.matching)) ticks += treeTicks(child);
    } else {
      ticks = treeTicks(pid);
      if (source.except !== undefined)
        for (const child of children.get(pid) ?? [])
          if ((await cmdline(child)).includes(source.except)) ticks -= treeTicks(child);
    }
    result[name] = (ticks * 1000) / ticksPerSecond;
  }
  return result;
}

/** The PID in a PostgreSQL data directory's postmaster.pid: the server whose backends are its children. */
export async function postmasterPid(dataDir: string): Promise<number | undefined> {
  try {
    return Number((await readFile(`${dataDir}/postmaster.pid`, 'utf8')).split('\n')[0]);
  } catch {
    return undefined;
  }
}
