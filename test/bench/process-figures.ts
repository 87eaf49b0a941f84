/**
 * What the benchmarks read of a process: its samples on /metrics (Prometheus text), and its memory
 * and CPU time from /proc (Linux). Shared by bench:scale and bench:policies.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const m of text.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1] ?? ''] = m[2] ?? '';
  return labels;
}

/** The samples of `names` in a Prometheus text exposition. */
export function parsePrometheus(text: string, names: ReadonlySet<string>): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{.*\})?\s+(\S+)/.exec(line);
    if (!m || !names.has(m[1] ?? '')) continue;
    samples.push({ name: m[1] ?? '', labels: parseLabels(m[2] ?? ''), value: Number(m[3]) });
  }
  return samples;
}

export function sumOf(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** Resident memory of `pid` from /proc/PID/status, bytes: all, anonymous, and file-backed (the mapped Node binary). */
export interface ResidentBytes {
  rss: number;
  anon?: number;
  file?: number;
}

export async function residentBytes(pid: number): Promise<ResidentBytes | undefined> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const field = (name: string): number | undefined => {
    const kb = new RegExp(`^${name}:\\s+(\\d+)\\s+kB`, 'm').exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  };
  const rss = field('VmRSS');
  if (rss === undefined) return undefined;
  const anon = field('RssAnon');
  const file = field('RssFile');
  return { rss, ...(anon === undefined ? {} : { anon }), ...(file === undefined ? {} : { file }) };
}

export async function rssBytes(pid: number): Promise<number | undefined> {
  return (await residentBytes(pid))?.rss;
}

export async function clockTicks(): Promise<number> {
  try {
    return Number((await run('getconf', ['CLK_TCK'])).stdout.trim()) || 100;
  } catch {
    return 100;
  }
}

/** utime + stime of `pid`, seconds. */
export async function cpuSeconds(pid: number, ticks: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  if (stat === '') return undefined;
  // After "(comm) ": state is field 3; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / ticks;
}
