// The contended benchmark's ceiling on this machine: a FIFO counting semaphore in process (no store,
// no lease, no round trip), with the face contended-side.mjs drives, so that it runs in the same
// rounds as the Redis subjects and shares their load (bench/HISTORY.md, "Contended hand-off, fifth
// round"; `npm run bench -- --only=contended` runs async-sema for the same purpose).
//   node bench/floors/contended-side.mjs --port=6403 inprocess=bench/floors/handoff-inprocess.mjs ...
export function semaphore({ limit }) {
  let free = limit;
  const waiting = [];
  const lease = {
    release() {
      const next = waiting.shift();
      if (next === undefined) free++;
      else next(lease);
      return Promise.resolve(true);
    },
  };
  return {
    acquire() {
      if (free > 0) {
        free--;
        return Promise.resolve(lease);
      }
      return new Promise((resolve) => waiting.push(resolve));
    },
  };
}
