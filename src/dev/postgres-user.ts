import { spawnSync } from 'node:child_process';
import path from 'node:path';

/**
 * PostgreSQL refuses to run as root. Run as root, the embedded server runs initdb and postgres as
 * this operating-system user instead, which must reach both the executables and the cluster.
 */
export const postgresOsUser = 'postgres';

export interface UserIds {
  uid: number;
  gid: number;
}

/** The `postgres` user's ids, creating the user if it is missing (as the package's launcher did). */
export function postgresUserIds(): UserIds {
  const ids = () => {
    const uid = spawnSync('id', ['-u', postgresOsUser], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', postgresOsUser], { encoding: 'utf8' });
    if (uid.status !== 0 || gid.status !== 0) return null;
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  };
  const found = ids();
  if (found) return found;
  spawnSync('groupadd', ['--system', postgresOsUser], { stdio: 'ignore' });
  const added = spawnSync(
    'useradd',
    ['--system', '--gid', postgresOsUser, '--no-create-home', postgresOsUser],
    { encoding: 'utf8' },
  );
  const created = ids();
  if (!created) {
    throw new Error(
      `PostgreSQL cannot run as root and there is no ${postgresOsUser} user to run it as (useradd: ${(added.stderr || String(added.error)).trim()}); create one, or run npm start as another user.`,
    );
  }
  return created;
}

/** Whether the postgres user can walk into `dir` (every ancestor searchable). */
export function canReach(dir: string, ids: UserIds): boolean {
  const probe = spawnSync(
    process.execPath,
    ['-e', `require('fs').readdirSync(${JSON.stringify(path.resolve(dir))})`],
    { ...ids, stdio: 'ignore' },
  );
  return probe.status === 0;
}
