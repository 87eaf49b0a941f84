/**
 * Sets the chart's `version` and `appVersion` (charts/portico/Chart.yaml) to the release's version,
 * keeping the file's comments and layout. The image tag follows: the chart's default `image.tag` is
 * empty, which means the appVersion (templates/_helpers.tpl). Pure.
 */
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
