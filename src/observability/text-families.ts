/**
 * Metric families written straight as Prometheus text (exposition format 0.0.4), beside prom-client's
 * own. prom-client builds an object per sample at each scrape (a labels object, a value object) and
 * then formats each one with its label merging and escaping: for the per-domain families at
 * 10,000 domains (60,000 series, 8.5 MB of text) one scrape took 0.6 s of CPU and left about 70 MB
 * of garbage, which grew the heap by as much (docs/performance.md). A text family writes each line
 * from the cached objects directly.
 *
 * `TextFamiliesRegistry` is a prom-client Registry whose `metrics()` is its own metrics followed by
 * each text family, and whose `getSingleMetricAsString(name)` also answers a text family (the
 * `/metrics?name[]=` filter of http-server.ts). `metricsChunks()` gives the same text in pieces of
 * about 64 KiB, each family's lines written as they are sent: one 8.5 MB answer at 10,000 domains
 * was a single string (and a native copy of it for the socket) that raised the operator's resident
 * set by about 22 MiB for each scrape (`test/bench/scrape.ts`, docs/performance.md).
 */
import { Registry } from 'prom-client';

/** The sample lines of a family at one scrape (`name{labels} value`, no newline), in order. */
export type RenderSamples = () => Iterable<string>;

/** Characters of sample lines gathered into one chunk of `metricsChunks()`. */
const CHUNK_CHARS = 64 * 1024;

interface TextFamily {
  name: string;
  help: string;
  render: RenderSamples;
}

/** A label value escaped for the text format: backslash, double quote and line feed. */
export function escapeLabelValue(value: string): string {
  return /[\\"\n]/.test(value) ? value.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`)) : value;
}

/** HELP text escaped for the text format: backslash and line feed. */
function escapeHelp(help: string): string {
  return help.replace(/[\\\n]/g, (c) => (c === '\n' ? '\\n' : '\\\\'));
}

/** A sample value as the text format writes it (`+Inf`, `-Inf`, `NaN`, else the shortest decimal). */
export function formatSampleValue(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}

export class TextFamiliesRegistry extends Registry {
  readonly #families = new Map<string, TextFamily>();

  /**
   * Adds a gauge family written as text: `# HELP`, `# TYPE name gauge`, then the lines `render`
   * appends at each scrape. Throws when a metric or family of that name exists.
   */
  registerTextGauge(name: string, help: string, render: RenderSamples): void {
    if (this.#families.has(name) || super.getSingleMetric(name) !== undefined)
      throw new Error(`a metric named ${name} is already registered`);
    this.#families.set(name, { name, help, render });
  }

  /** Whether `name` is one of the text families. */
  hasTextFamily(name: string): boolean {
    return this.#families.has(name);
  }

  override async metrics(): Promise<string> {
    const parts = [await super.metrics()];
    for (const family of this.#families.values()) parts.push('\n', familyText(family));
    return parts.join('');
  }

  /**
   * The text `metrics()` answers, in order, as chunks: prom-client's own metrics first (one chunk),
   * then each text family in chunks of about 64 Ki characters, each written when it is asked for.
   * Rejects as prom-client's `metrics()` does (a failing collect callback); a text family's render
   * that throws rejects the next chunk.
   */
  async *metricsChunks(): AsyncGenerator<string, void, undefined> {
    yield await super.metrics();
    for (const family of this.#families.values()) {
      yield '\n';
      yield* familyChunks(family, CHUNK_CHARS);
    }
  }

  override getSingleMetricAsString(name: string): Promise<string> {
    const family = this.#families.get(name);
    return family ? Promise.resolve(familyText(family)) : super.getSingleMetricAsString(name);
  }
}

/** A family's whole text: its chunks (`familyChunks`) as one. */
function familyText(family: TextFamily): string {
  return [...familyChunks(family, Infinity)].join('');
}

/**
 * A family's text (`# HELP`, `# TYPE`, then a line per sample, each line ending in a line feed) in
 * chunks of at least `chunkChars` characters but the last.
 */
function* familyChunks(family: TextFamily, chunkChars: number): Generator<string, void, undefined> {
  let lines = [`# HELP ${family.name} ${escapeHelp(family.help)}`, `# TYPE ${family.name} gauge`];
  let chars = 0;
  for (const line of family.render()) {
    lines.push(line);
    chars += line.length + 1;
    if (chars >= chunkChars) {
      lines.push('');
      yield lines.join('\n');
      lines = [];
      chars = 0;
    }
  }
  if (lines.length > 0) {
    lines.push('');
    yield lines.join('\n');
  }
}
