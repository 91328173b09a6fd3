declare module "cluster-key-slot" {
  /** The Redis Cluster hash slot of a key (hash tags honoured). */
  export default function calculateSlot(key: string | Buffer): number;
}
