/**
 * A vitest reporter that ends the run's output with one line per failure: file, test and the first
 * line of its error. The default reporter prints every failure in full before the summary, so with
 * many failures the first ones scroll out of a CI log's tail; this list stays at the very end.
 * Prints nothing when everything passed.
 */
import type { Reporter, TestModule } from 'vitest/node';

function firstLine(message: string | undefined): string {
  return (message ?? '').split('\n')[0]?.slice(0, 300) ?? '';
}

/** The failures of one file, as lines; module-level errors (hooks, imports) when no test failed. */
function failuresOf(module: TestModule): string[] {
  const lines: string[] = [];
  for (const test of module.children.allTests('failed')) {
    const result = test.result();
    const message = result.state === 'failed' ? result.errors[0]?.message : undefined;
    lines.push(`${module.relativeModuleId} > ${test.fullName}: ${firstLine(message)}`);
  }
  if (lines.length === 0 && module.state() === 'failed') {
    for (const error of module.errors())
      lines.push(`${module.relativeModuleId}: ${firstLine(error.message)}`);
  }
  return lines;
}

export default class FailureSummaryReporter implements Reporter {
  onTestRunEnd(testModules: readonly TestModule[]): void {
    const lines = testModules.flatMap(failuresOf);
    if (lines.length === 0) return;
    process.stdout.write(`\nFailures (${lines.length}), in the order the files ran:\n`);
    for (const line of lines) process.stdout.write(`  ✗ ${line}\n`);
  }
}
