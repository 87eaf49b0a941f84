import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisErrorKind } from './redis-store.js';

/** ioredis's class for an error Redis answered (from redis-errors, typed `any` there). */
const RedisReplyError = ReplyError as unknown as new (message: string) => Error;

describe('redisErrorKind', () => {
  it('names an error Redis answered, a command timeout and a missing connection', () => {
    expect(redisErrorKind(new RedisReplyError('BUSY Redis is busy running a script'))).toBe('reply');
    // ioredis's own messages (Command.ts commandTimeout, Redis.ts without an offline queue).
    expect(redisErrorKind(new Error('Command timed out'))).toBe('timeout');
    expect(redisErrorKind(new Error("Stream isn't writeable and enableOfflineQueue options is false"))).toBe(
      'connection',
    );
    expect(redisErrorKind(new Error('Connection is closed.'))).toBe('connection');
  });
});
