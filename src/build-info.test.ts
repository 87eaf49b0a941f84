import { describe, expect, it } from 'vitest';
import { DEV_BUILD_INFO, buildInfo, formatVersion, parseBuildInfo } from './build-info.js';

describe('build info', () => {
  it('accepts a version and a commit, and nothing else', () => {
    expect(parseBuildInfo({ version: '0.2.0', commit: 'abc', extra: 1 })).toEqual({
      version: '0.2.0',
      commit: 'abc',
    });
    expect(() => parseBuildInfo({ version: '0.2.0' })).toThrow(/"version" and "commit"/);
    expect(() => parseBuildInfo(null)).toThrow(TypeError);
    expect(() => parseBuildInfo('0.2.0')).toThrow(TypeError);
  });

  it('reports a development build when run from the sources (no build-info.json beside it)', () => {
    expect(buildInfo()).toEqual(DEV_BUILD_INFO);
  });

  it('prints the program, version, commit and Node.js version on one line', () => {
    expect(formatVersion('portico', { version: '1.2.3', commit: 'f00' }, 'v24.21.0')).toBe(
      'portico 1.2.3 (commit f00, Node.js v24.21.0)\n',
    );
  });
});
