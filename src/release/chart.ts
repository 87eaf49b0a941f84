/**
 * The release's edits to the chart, keeping each file's comments and layout: the chart's `version`
 * and `appVersion` (charts/portico/Chart.yaml), and the image it names (values.yaml `image`: in the
 * release commit the repository and the version's tag; in the packaged chart also the digest the
 * registry answered for the pushed image). A chart that names neither tag nor digest refuses to
 * render (templates/_helpers.tpl). Pure.
 */
import { isMap, parseDocument } from 'yaml';
import { ReleaseError } from './errors.js';

function replaceOnce(text: string, key: string, value: string): string {
  const line = new RegExp(`^${key}:.*$`, 'gm');
  const found = text.match(line)?.length ?? 0;
  if (found !== 1) {
    throw new ReleaseError(`Chart.yaml: expected one top-level "${key}:" line, found ${String(found)}`);
  }
  return text.replace(line, `${key}: ${value}`);
}

/**
 * @returns Chart.yaml with `version: <version>` and `appVersion: '<version>'`.
 * @throws ReleaseError when either key is not exactly one top-level line.
 */
export function setChartVersion(chartYaml: string, version: string): string {
  return replaceOnce(replaceOnce(chartYaml, 'version', version), 'appVersion', `'${version}'`);
}

/** The image a release pushed, as the chart names it. */
export interface ChartImage {
  /** e.g. `ghcr.io/portico-dev/portico`, without tag or digest. */
  repository: string;
  /** The release's version. */
  tag: string;
  /** `sha256:<64 hex>`, the manifest digest the registry answered; omitted: left as it is. */
  digest?: string;
}

/**
 * Sets `image.repository`, `image.tag` and (when given) `image.digest` in the chart's values.yaml,
 * keeping its comments and layout (`yaml`'s document API).
 * @returns the new values.yaml text.
 * @throws ReleaseError when values.yaml has no `image` map, or a digest is not `sha256:<64 hex>`.
 */
export function setChartImage(valuesYaml: string, image: ChartImage): string {
  const doc = parseDocument(valuesYaml);
  if (!isMap(doc.get('image'))) throw new ReleaseError('values.yaml: no top-level "image:" map');
  if (image.digest !== undefined && !/^sha256:[0-9a-f]{64}$/.test(image.digest)) {
    throw new ReleaseError(`image digest ${image.digest}: not sha256:<64 lowercase hex>`);
  }
  doc.setIn(['image', 'repository'], image.repository);
  doc.setIn(['image', 'tag'], image.tag);
  if (image.digest !== undefined) doc.setIn(['image', 'digest'], image.digest);
  return doc.toString({ lineWidth: 0 });
}
