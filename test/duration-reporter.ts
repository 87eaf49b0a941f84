/**
 * A vitest reporter that writes how long each test file took, and how many of its tests passed,
 * failed or were skipped, to `test-results/durations.json` (git ignores `test-results/`; the
 * variable PORTICO_TEST_DURATIONS_FILE names another path), and ends the run's output with the
 * slowest files. docs/testing.md says where the suite's time goes from these figures.
 *
 * A file's time is vitest's own account of it: importing it (collect), its setup files, and its
 * tests and hooks (duration), in milliseconds; the e2e stack's global setup is not in any file's time.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

/** One line of the report, per test file. */
export interface FileDuration {
  /** The file's path from the repository root. */
  file: string;
  /** The vitest project that ran it (`unit`, `e2e`). */
  project: string;
  /** Import, setup files, tests and hooks, ms (rounded). */
  totalMs: number;
  /** Tests and hooks only, ms (rounded). */
  testsMs: number;
  passed: number;
  failed: number;
  skipped: number;
}

/** The report's JSON: when the run ended, its files slowest first, and the sums by project. */
export interface DurationReport {
  finishedAt: string;
  /** Wall-clock time from the reporter's start to the end of the run, ms. */
  runMs: number;
  files: FileDuration[];
  projects: Record<
    string,
    { files: number; totalMs: number; passed: number; failed: number; skipped: number }
  >;
}

/** How many of the slowest files are printed at the end of the run. */
const PRINTED = 10;

export function fileDuration(module: TestModule): FileDuration {
  const d = module.diagnostic();
  const count = (state: 'passed' | 'failed' | 'skipped'): number =>
    [...module.children.allTests(state)].length;
  return {
    file: module.relativeModuleId,
    project: module.project.name,
    totalMs: Math.round(d.collectDuration + d.setupDuration + d.duration),
    testsMs: Math.round(d.duration),
    passed: count('passed'),
    failed: count('failed'),
    skipped: count('skipped'),
  };
}

/** The report of `files` (any order): slowest first, with per-project sums. */
export function durationReport(files: readonly FileDuration[], runMs: number, now: Date): DurationReport {
  const sorted = [...files].sort((a, b) => b.totalMs - a.totalMs);
  const projects: DurationReport['projects'] = {};
  for (const f of sorted) {
    const p = (projects[f.project] ??= { files: 0, totalMs: 0, passed: 0, failed: 0, skipped: 0 });
    p.files += 1;
    p.totalMs += f.totalMs;
    p.passed += f.passed;
    p.failed += f.failed;
    p.skipped += f.skipped;
  }
  return { finishedAt: now.toISOString(), runMs: Math.round(runMs), files: sorted, projects };
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

export default class DurationReporter implements Reporter {
  readonly #startedAt = performance.now();

  onTestRunEnd(testModules: readonly TestModule[]): void {
    if (testModules.length === 0) return;
    const report = durationReport(
      testModules.map(fileDuration),
      performance.now() - this.#startedAt,
      new Date(),
    );
    const out = resolve(process.env.PORTICO_TEST_DURATIONS_FILE ?? 'test-results/durations.json');
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
    const lines = [`\nSlowest test files (all ${report.files.length} in ${out}):`];
    for (const f of report.files.slice(0, PRINTED)) {
      const skipped = f.skipped > 0 ? `, ${f.skipped} skipped` : '';
      lines.push(
        `  ${seconds(f.totalMs).padStart(8)}  ${f.file} (${f.project}: ${f.passed + f.failed} ran${skipped})`,
      );
    }
    for (const [name, p] of Object.entries(report.projects)) {
      lines.push(
        `  ${name}: ${p.files} files, ${seconds(p.totalMs)} in files; ${p.passed} passed, ${p.failed} failed, ${p.skipped} skipped`,
      );
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  }
}
