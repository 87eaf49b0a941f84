/** cluster-key-slot (ioredis's own dependency) ships no types: its one function. */
declare module 'cluster-key-slot' {
  /** The Redis Cluster hash slot (0-16383) of `key`, its hash tag honoured (Redis Cluster specification). */
  export default function calculateSlot(key: string | Buffer): number;
}
