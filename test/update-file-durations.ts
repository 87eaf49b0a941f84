/**
 * Writes `test/e2e/file-durations.json`, the weights by which the e2e files are dealt into shards
 * (test/e2e-shards.ts), from the duration reports of the last run in `test-results/`
 * (`durations.json` of a one-process run, `durations-e2e-<i>.json` of a sharded `npm test`;
 * test/duration-reporter.ts). Only the e2e project's files are kept; a file in several reports
 * keeps its last figure, reports read in name order.
 *
 * Usage, after a whole run: `npx tsx test/update-file-durations.ts ["<what was run>"]`.
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { DurationReport } from './duration-reporter.js';
import { FILE_DURATIONS_PATH, type FileDurations } from './e2e-shards.js';

const root = path.resolve(import.meta.dirname, '..');
const resultsDir = path.join(root, 'test-results');
const reports = readdirSync(resultsDir)
  .filter((name) => /^durations(-e2e-\d+)?\.json$/.test(name))
  .sort();
if (reports.length === 0) throw new Error(`no durations*.json in ${resultsDir}: run the e2e tests first`);

const totalMs: Record<string, number> = {};
for (const name of reports) {
  const report = JSON.parse(readFileSync(path.join(resultsDir, name), 'utf8')) as DurationReport;
  for (const file of report.files) if (file.project === 'e2e') totalMs[file.file] = file.totalMs;
}
const sorted = Object.fromEntries(Object.entries(totalMs).sort(([a], [b]) => (a < b ? -1 : 1)));
const out: FileDurations = {
  measured: process.argv[2] ?? `${new Date().toISOString().slice(0, 10)}, from ${reports.join(', ')}`,
  totalMs: sorted,
};
writeFileSync(path.join(root, FILE_DURATIONS_PATH), `${JSON.stringify(out, null, 2)}\n`);
process.stdout.write(`${FILE_DURATIONS_PATH}: ${Object.keys(sorted).length} e2e files\n`);
