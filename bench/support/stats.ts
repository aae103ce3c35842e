/**
 * Percentiles and medians for the bench. Exact (every sample kept and sorted): the runs are
 * bounded, so a few hundred thousand doubles at most, and no histogram rounding to explain.
 */

export interface LatencySummary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of sorted values (p in 0..100). */
export function percentileOfSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  // The epsilon keeps floating point from pushing an exact rank up by one (0.999 × 1000 > 999).
  const rank = Math.ceil((p / 100) * sorted.length - 1e-9);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number;
}

export function summarize(values: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (const value of sorted) sum += value;
  return {
    count: sorted.length,
    p50: percentileOfSorted(sorted, 50),
    p90: percentileOfSorted(sorted, 90),
    p99: percentileOfSorted(sorted, 99),
    p999: percentileOfSorted(sorted, 99.9),
    max: sorted.length ? (sorted[sorted.length - 1] as number) : Number.NaN,
    mean: sorted.length ? sum / sorted.length : Number.NaN,
  };
}

/** The median of repeated runs' figures (NaN-free values only; NaN when none). */
export function median(values: number[]): number {
  const finite = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (finite.length === 0) return Number.NaN;
  const middle = Math.floor(finite.length / 2);
  return finite.length % 2
    ? (finite[middle] as number)
    : ((finite[middle - 1] as number) + (finite[middle] as number)) / 2;
}

/** Median of each field over runs, e.g. the median p99 of five runs. */
export function medianOf<T extends object>(runs: T[], pick: (run: T) => number): number {
  return median(runs.map(pick));
}

/** ours / theirs, or NaN when either side is missing. */
export function ratio(numerator: number, denominator: number): number {
  return Number.isFinite(numerator) && Number.isFinite(denominator) && denominator !== 0
    ? numerator / denominator
    : Number.NaN;
}

export const round = (value: number, digits = 1): number =>
  Number.isFinite(value) ? Number(value.toFixed(digits)) : Number.NaN;
