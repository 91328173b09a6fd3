/** Latency samples and what they add up to. */
export interface Sample {
  ops: number;
  seconds: number;
  opsPerSec: number;
  p50: number;
  p99: number;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

export function summarize(latencies: number[], seconds: number): Sample {
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    ops: latencies.length,
    seconds,
    opsPerSec: latencies.length / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
  };
}

/** Runs `op` from `concurrency` loops for `durationMs`, timing each call. */
export async function cycles(op: () => Promise<unknown>, concurrency: number, durationMs: number): Promise<Sample> {
  const latencies: number[] = [];
  const started = performance.now();
  const until = started + durationMs;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const t0 = performance.now();
        await op();
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return summarize(latencies, (performance.now() - started) / 1000);
}

/** The median of several runs of the same measurement: one noisy run cannot decide a ratio. */
export function medianOf(samples: Sample[]): Sample {
  const sorted = [...samples].sort((a, b) => a.opsPerSec - b.opsPerSec);
  return sorted[Math.floor(sorted.length / 2)] as Sample;
}

export const round = (value: number, digits = 2): number => Math.round(value * 10 ** digits) / 10 ** digits;
