import { createServer } from 'node:net';

import { describe, expect, it } from 'vitest';

import { pickFreePorts } from './ports.js';

describe('pickFreePorts', () => {
  it('returns distinct ports, by name, that can be bound on 127.0.0.1', async () => {
    const ports = await pickFreePorts({ a: 'tcp', b: 'tcp+udp', c: 'tcp' });
    expect(new Set(Object.values(ports)).size).toBe(3);
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(ports.b, '127.0.0.1', resolve);
    });
    await new Promise((resolve) => server.close(resolve));
  });
});
