import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { get, type Server } from 'node:http';

import { closeServer, projectPage, startProjectBackend } from './project-backend.js';

describe('projectPage', () => {
  it('names the project, the Host and the target, HTML-escaped', () => {
    const page = projectPage('shop', 'www.shop.example', '/a?b=<c>&d');
    expect(page).toContain('<title>shop</title>');
    expect(page).toContain('<h1>shop</h1>');
    expect(page).toContain('answered www.shop.example /a?b=&#60;c&#62;&#38;d');
  });
});

describe('startProjectBackend', () => {
  let server: Server | undefined;
  let port = 0;
  beforeAll(async () => {
    ({ server, port } = await startProjectBackend('shop'));
  });
  afterAll(async () => {
    if (server) await closeServer(server);
  });

  it('answers any path on 127.0.0.1 with 200 and the page', async () => {
    const answer = await new Promise<{ status: number | undefined; project: unknown; body: string }>(
      (resolve, reject) => {
        get({ port, host: '127.0.0.1', path: '/x/y?z=1', headers: { host: 'docs.shop.example' } }, (res) => {
          let body = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (body += chunk));
          res.on('end', () => {
            resolve({ status: res.statusCode, project: res.headers['x-portico-project'], body });
          });
        }).on('error', reject);
      },
    );
    expect(answer.status).toBe(200);
    expect(answer.project).toBe('shop');
    expect(answer.body).toContain('answered docs.shop.example /x/y?z=1');
  });
});
