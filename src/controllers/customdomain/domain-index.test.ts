import { describe, expect, it } from 'vitest';

import type { CustomDomain } from '../../api/customdomain.js';
import { CustomDomainIndex } from './domain-index.js';

function domain(
  namespace: string,
  name: string,
  hostname: string,
  service?: string,
  extra: Partial<CustomDomain['spec']> = {},
): CustomDomain {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { namespace, name },
    spec: { hostname, ...(service === undefined ? {} : { service: { name: service, port: 80 } }), ...extra },
  };
}

/** The keys of an index lookup, sorted. */
const keys = (found: Iterable<string>): string[] => [...found].sort();

describe('CustomDomainIndex', () => {
  it('finds upserted domains by namespace, by Service and by hostname', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web'));
    index.upsert(domain('team-a', 'blog', 'blog.example.com', 'web'));
    index.upsert(domain('team-a', 'api', 'api.example.com', 'api'));
    index.upsert(domain('team-b', 'shop', 'shop.example.org', 'web'));

    expect(index.size).toBe(4);
    expect(keys(index.inNamespace('team-a'))).toEqual(['team-a/api', 'team-a/blog', 'team-a/shop']);
    expect(keys(index.inNamespace('team-b'))).toEqual(['team-b/shop']);
    expect(keys(index.inNamespace('team-c'))).toEqual([]);
    // A Service is named within its namespace: team-b's "web" is not team-a's.
    expect(keys(index.ofService('team-a', 'web'))).toEqual(['team-a/blog', 'team-a/shop']);
    expect(keys(index.ofService('team-b', 'web'))).toEqual(['team-b/shop']);
    expect(keys(index.ofService('team-a', 'api'))).toEqual(['team-a/api']);
    expect(keys(index.ofService('team-b', 'api'))).toEqual([]);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-a/shop']);
    expect(keys(index.ofHostname('example.com'))).toEqual([]);
  });

  it('finds every domain of a hostname, across namespaces', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web'));
    index.upsert(domain('team-b', 'copy', 'shop.example.com', 'web'));

    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-a/shop', 'team-b/copy']);
  });

  it('normalizes hostnames, both indexed and looked up (case, trailing dot)', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'Shop.Example.COM.'));

    for (const hostname of [
      'shop.example.com',
      'SHOP.EXAMPLE.COM',
      'shop.example.com.',
      'Shop.Example.Com.',
    ]) {
      expect(keys(index.ofHostname(hostname))).toEqual(['team-a/shop']);
    }
    expect(keys(index.ofHostname('shop.example.com..'))).toEqual([]);
  });

  it('indexes a domain without spec.service by namespace and hostname only', () => {
    const index = new CustomDomainIndex();
    index.upsert(
      domain('team-a', 'old', 'old.example.com', undefined, { redirect: { to: 'new.example.com' } }),
    );

    expect(index.size).toBe(1);
    expect(keys(index.inNamespace('team-a'))).toEqual(['team-a/old']);
    expect(keys(index.ofHostname('old.example.com'))).toEqual(['team-a/old']);
    expect(keys(index.ofService('team-a', 'undefined'))).toEqual([]);
    expect(keys(index.ofService('team-a', ''))).toEqual([]);
  });

  it('moves the key when an update changes spec.service', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web'));
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web-v2'));

    expect(index.size).toBe(1);
    expect(keys(index.ofService('team-a', 'web'))).toEqual([]);
    expect(keys(index.ofService('team-a', 'web-v2'))).toEqual(['team-a/shop']);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-a/shop']);
    expect(keys(index.inNamespace('team-a'))).toEqual(['team-a/shop']);
  });

  it('moves the key when an update removes or adds spec.service', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web'));
    index.upsert(domain('team-a', 'shop', 'shop.example.com'));
    expect(keys(index.ofService('team-a', 'web'))).toEqual([]);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-a/shop']);

    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'api'));
    expect(keys(index.ofService('team-a', 'api'))).toEqual(['team-a/shop']);
    expect(index.size).toBe(1);
  });

  it('moves the key when an update changes the hostname', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web'));
    index.upsert(domain('team-a', 'shop', 'store.example.com', 'web'));

    expect(index.size).toBe(1);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual([]);
    expect(keys(index.ofHostname('store.example.com'))).toEqual(['team-a/shop']);
    expect(keys(index.ofService('team-a', 'web'))).toEqual(['team-a/shop']);
  });

  it('keeps the other keys of an index value when one key moves away', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web'));
    index.upsert(domain('team-a', 'blog', 'blog.example.com', 'web'));
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'api'));

    expect(keys(index.ofService('team-a', 'web'))).toEqual(['team-a/blog']);
    expect(keys(index.ofService('team-a', 'api'))).toEqual(['team-a/shop']);
  });

  it('treats an update that changes nothing indexed (or only the hostname case) as no change', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web'));
    const updated = domain('team-a', 'shop', 'SHOP.example.com', 'web');
    updated.metadata.labels = { tier: 'gold' };
    index.upsert(updated);

    expect(index.size).toBe(1);
    expect(keys(index.inNamespace('team-a'))).toEqual(['team-a/shop']);
    expect(keys(index.ofService('team-a', 'web'))).toEqual(['team-a/shop']);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-a/shop']);
  });

  it('forgets deleted domains and leaves no empty index values behind', () => {
    const index = new CustomDomainIndex();
    const shop = domain('team-a', 'shop', 'shop.example.com', 'web');
    const blog = domain('team-a', 'blog', 'blog.example.com', 'web');
    index.upsert(shop);
    index.upsert(blog);

    index.delete(shop);
    expect(index.size).toBe(1);
    expect(keys(index.ofService('team-a', 'web'))).toEqual(['team-a/blog']);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual([]);

    index.delete(blog);
    expect(index.size).toBe(0);
    expect(keys(index.inNamespace('team-a'))).toEqual([]);
    expect(keys(index.ofService('team-a', 'web'))).toEqual([]);
    expect(keys(index.ofHostname('blog.example.com'))).toEqual([]);

    // A later domain of the same values is indexed afresh.
    index.upsert(domain('team-a', 'new', 'blog.example.com', 'web'));
    expect(keys(index.ofService('team-a', 'web'))).toEqual(['team-a/new']);
    expect(keys(index.ofHostname('blog.example.com'))).toEqual(['team-a/new']);
  });

  it('keeps the keys of a hostname right as it goes from one domain to three and back to none', () => {
    const index = new CustomDomainIndex();
    const first = domain('team-a', 'shop', 'shop.example.com');
    const second = domain('team-b', 'shop', 'shop.example.com');
    const third = domain('team-c', 'shop', 'shop.example.com');
    index.upsert(first);
    index.upsert(first);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-a/shop']);
    index.upsert(second);
    index.upsert(third);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-a/shop', 'team-b/shop', 'team-c/shop']);

    index.delete(first);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-b/shop', 'team-c/shop']);
    index.delete(third);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-b/shop']);
    index.upsert(first);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-a/shop', 'team-b/shop']);
    index.delete(second);
    index.delete(first);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual([]);
    expect(index.size).toBe(0);

    // A key that is not the one held leaves the held one in place.
    index.upsert(second);
    index.delete(third);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-b/shop']);
  });

  it('deletes by key: a stale copy (a tombstone with an older spec) removes the current entry', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web'));
    index.upsert(domain('team-a', 'shop', 'store.example.com', 'api'));

    index.delete(domain('team-a', 'shop', 'shop.example.com', 'web'));

    expect(index.size).toBe(0);
    expect(keys(index.ofHostname('store.example.com'))).toEqual([]);
    expect(keys(index.ofService('team-a', 'api'))).toEqual([]);
    expect(keys(index.inNamespace('team-a'))).toEqual([]);
  });

  it('ignores the delete of a domain it does not hold, and a second delete', () => {
    const index = new CustomDomainIndex();
    const shop = domain('team-a', 'shop', 'shop.example.com', 'web');
    index.upsert(shop);

    index.delete(domain('team-b', 'shop', 'shop.example.com', 'web'));
    expect(index.size).toBe(1);
    expect(keys(index.ofHostname('shop.example.com'))).toEqual(['team-a/shop']);

    index.delete(shop);
    index.delete(shop);
    expect(index.size).toBe(0);
  });

  it('keeps domains of the same name in different namespaces apart', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web'));
    index.upsert(domain('team-b', 'shop', 'shop.example.org', 'web'));

    index.delete(domain('team-a', 'shop', 'shop.example.com', 'web'));

    expect(index.size).toBe(1);
    expect(keys(index.inNamespace('team-a'))).toEqual([]);
    expect(keys(index.inNamespace('team-b'))).toEqual(['team-b/shop']);
    expect(keys(index.ofService('team-b', 'web'))).toEqual(['team-b/shop']);
  });

  it('finds the redirects to a hostname, and moves or drops them when redirect.to changes or goes', () => {
    const index = new CustomDomainIndex();
    index.upsert(domain('team-a', 'shop', 'shop.example.com', 'web'));
    index.upsert(
      domain('team-a', 'www', 'www.shop.example.com', undefined, { redirect: { to: 'Shop.Example.com.' } }),
    );
    index.upsert(
      domain('team-a', 'old', 'old.example.com', undefined, { redirect: { to: 'shop.example.com' } }),
    );
    index.upsert(
      domain('team-b', 'copy', 'copy.example.org', undefined, { redirect: { to: 'shop.example.com' } }),
    );

    expect(keys(index.redirectingTo('shop.example.com'))).toEqual([
      'team-a/old',
      'team-a/www',
      'team-b/copy',
    ]);
    expect(keys(index.redirectingTo('SHOP.example.com'))).toEqual([
      'team-a/old',
      'team-a/www',
      'team-b/copy',
    ]);
    expect(keys(index.redirectingTo('www.shop.example.com'))).toEqual([]);

    index.upsert(
      domain('team-a', 'old', 'old.example.com', undefined, { redirect: { to: 'blog.example.com' } }),
    );
    expect(keys(index.redirectingTo('shop.example.com'))).toEqual(['team-a/www', 'team-b/copy']);
    expect(keys(index.redirectingTo('blog.example.com'))).toEqual(['team-a/old']);

    index.upsert(domain('team-a', 'www', 'www.shop.example.com', 'web'));
    index.delete(domain('team-b', 'copy', 'copy.example.org'));
    expect(keys(index.redirectingTo('shop.example.com'))).toEqual([]);
    expect(index.hostnameOf('team-a/www')).toBe('www.shop.example.com');
    expect(index.hostnameOf('team-b/copy')).toBeUndefined();
  });
});
