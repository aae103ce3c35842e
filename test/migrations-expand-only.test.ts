// Schema changes both builds survive (docs/changing-the-workflow.md, "Database migrations"):
// during a rolling deploy the previous build's workers and APIs run against the new schema, so a
// release's migrations only add (expand). Dropping or renaming what the previous build reads
// (contract) waits for a later release, once no worker of the old build runs. This lint reads
// every migration the newest kept release did not have (test/histories/<build>/migrations.json,
// written by `npm run histories:record`) and refuses, in its Up section, a DROP or RENAME of a
// table or column, a change of a column's type, or a new NOT NULL on an existing column. A
// deliberate contraction says so on a line of its own: `-- contract: <why no running build reads it>`.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';
import { MIGRATIONS_DIR } from '../scripts/db-migrate';

const HISTORIES = path.join(__dirname, 'histories');

/** What a release's migrations may not do to the schema the previous build reads. */
const CONTRACTIONS: Array<[RegExp, string]> = [
  [/\bDROP\s+TABLE\b/i, 'drops a table'],
  [
    /\bDROP\s+(COLUMN\b|(?!INDEX|CONSTRAINT|TRIGGER|FUNCTION|VIEW|DEFAULT|NOT\s+NULL)\w+\s*(,|;|$))/im,
    'drops a column',
  ],
  [/\bRENAME\b/i, 'renames a table or column'],
  [/\bALTER\s+COLUMN\s+\w+\s+(SET\s+DATA\s+)?TYPE\b/i, "changes a column's type"],
  [/\bALTER\s+COLUMN\s+\w+\s+SET\s+NOT\s+NULL\b/i, 'makes an existing column NOT NULL'],
];

export function contractionsIn(sql: string): string[] {
  const up = sql.split(/^--\s*Down Migration\b/im)[0] ?? '';
  if (/^--\s*contract:\s*\S/im.test(up)) return [];
  const code = up.replace(/--.*$/gm, ''); // comments say "renamed" freely
  return CONTRACTIONS.filter(([pattern]) => pattern.test(code)).map(([, what]) => what);
}

function newestRelease(): { build: string; migrations: string[] } | undefined {
  const releases = readdirSync(HISTORIES, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .flatMap((entry) => {
      try {
        const file = path.join(HISTORIES, entry.name, 'migrations.json');
        const migrations = JSON.parse(readFileSync(file, 'utf8')) as string[];
        return [{ build: entry.name, migrations }];
      } catch {
        return [];
      }
    });
  // The release that had the most migrations is the newest (migrations are only ever added).
  return releases.sort((a, b) => b.migrations.length - a.migrations.length)[0];
}

describe('migrations are additive within a release (expand now, contract in a later one)', () => {
  test('no migration newer than the newest kept release drops, renames or narrows what that release reads', () => {
    const release = newestRelease();
    assert.ok(release, 'a kept release records its migrations (test/histories/<build>/migrations.json)');
    const files = readdirSync(MIGRATIONS_DIR).filter((file) => file.endsWith('.sql'));
    for (const known of release.migrations)
      assert.ok(files.includes(known), `${known} (of ${release.build}) still exists`);
    const problems = files
      .filter((file) => !release.migrations.includes(file))
      .flatMap((file) =>
        contractionsIn(readFileSync(path.join(MIGRATIONS_DIR, file), 'utf8')).map(
          (what) => `${file} ${what}, which build ${release.build} may still read`,
        ),
      );
    assert.deepEqual(problems, []);
  });

  test('the lint refuses each contraction, accepts additions, down sections and a declared contraction', () => {
    const up = (sql: string) => `-- Up Migration\n${sql}\n-- Down Migration\nDROP TABLE t;\n`;
    assert.deepEqual(contractionsIn(up('DROP TABLE intake;')), ['drops a table']);
    assert.deepEqual(contractionsIn(up('ALTER TABLE intake DROP COLUMN attempts;')), ['drops a column']);
    assert.deepEqual(contractionsIn(up('ALTER TABLE intake DROP attempts;')), ['drops a column']);
    assert.deepEqual(contractionsIn(up('ALTER TABLE intake RENAME COLUMN attempts TO tries;')), [
      'renames a table or column',
    ]);
    assert.deepEqual(contractionsIn(up('ALTER TABLE intake ALTER COLUMN attempts TYPE bigint;')), [
      "changes a column's type",
    ]);
    assert.deepEqual(contractionsIn(up('ALTER TABLE intake ALTER COLUMN note SET NOT NULL;')), [
      'makes an existing column NOT NULL',
    ]);
    // Additive changes, and the Down section, pass.
    assert.deepEqual(
      contractionsIn(
        up(
          'ALTER TABLE intake ADD COLUMN note text;\nCREATE INDEX intake_note_idx ON intake (note);\nDROP INDEX old_idx;\nALTER TABLE intake DROP CONSTRAINT c;\n-- renamed in a later release',
        ),
      ),
      [],
    );
    assert.deepEqual(
      contractionsIn(up('-- contract: 0.1.0-abc stopped reading attempts\nALTER TABLE intake DROP COLUMN attempts;')),
      [],
    );
  });
});
