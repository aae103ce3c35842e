import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

/**
 * Reads V8 CPU profiles (node --cpu-prof) and says where the time went: self time per
 * function and per package (or project folder), the way one reads a flame graph's bottom-up view.
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

export interface ProfileSummary {
  file: string;
  totalMs: number;
  /** Share of sampled time by where the code lives: a package, a project folder, node internals, GC, idle. */
  byPlace: Array<{ place: string; ms: number; share: number }>;
  /** The functions with the most self time. */
  topFunctions: Array<{ fn: string; place: string; ms: number; share: number }>;
}

function placeOf(url: string, functionName: string): string {
  if (functionName === '(idle)' || functionName === '(program)' || functionName === '(garbage collector)')
    return functionName;
  if (!url) return '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const clean = url.replace(/^file:\/\//, '');
  const modules = clean.lastIndexOf('node_modules/');
  if (modules >= 0) {
    const rest = clean.slice(modules + 'node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1]}` : (rest[0] ?? clean);
  }
  // The last project folder in the path: .data/bench/dist/api/main.js is the API's code.
  const folders = [...clean.matchAll(/\/(api|activities|lib|worker|workflows|sandbox|bench)\//g)];
  const folder = folders.at(-1)?.[1];
  return folder ? `replyonce ${folder}/` : path.basename(clean);
}

export function summarizeProfile(file: string, top = 12): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfMs = new Map<number, number>();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    const id = samples[i] as number;
    selfMs.set(id, (selfMs.get(id) ?? 0) + (deltas[i] ?? 0) / 1000);
  }
  const places = new Map<string, number>();
  const functions = new Map<string, { fn: string; place: string; ms: number }>();
  let total = 0;
  for (const [id, ms] of selfMs) {
    const node = byId.get(id);
    if (!node) continue;
    const { functionName, url, lineNumber } = node.callFrame;
    const place = placeOf(url, functionName);
    if (place === '(idle)') continue;
    total += ms;
    places.set(place, (places.get(place) ?? 0) + ms);
    const key = `${functionName || '(anonymous)'} ${url}:${lineNumber + 1}`;
    const entry = functions.get(key) ?? {
      fn: `${functionName || '(anonymous)'} (${path.basename(url) || 'native'}:${lineNumber + 1})`,
      place,
      ms: 0,
    };
    entry.ms += ms;
    functions.set(key, entry);
  }
  const share = (ms: number) => (total > 0 ? ms / total : 0);
  return {
    file,
    totalMs: total,
    byPlace: [...places.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([place, ms]) => ({ place, ms, share: share(ms) })),
    topFunctions: [...functions.values()]
      .sort((a, b) => b.ms - a.ms)
      .slice(0, top)
      .map((f) => ({ ...f, share: share(f.ms) })),
  };
}

export function profilesIn(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => path.join(dir, f))
      .sort();
  } catch {
    return [];
  }
}

if (require.main === module) {
  // node --import tsx bench/support/profile.ts <file-or-dir>…: print a summary of each profile.
  for (const arg of process.argv.slice(2)) {
    for (const file of arg.endsWith('.cpuprofile') ? [arg] : profilesIn(arg)) {
      const summary = summarizeProfile(file);
      console.log(`\n${path.basename(file)}: ${(summary.totalMs / 1000).toFixed(2)} s sampled (idle excluded)`);
      for (const p of summary.byPlace) console.log(`  ${(p.share * 100).toFixed(1).padStart(5)} %  ${p.place}`);
      console.log('  top functions (self time):');
      for (const f of summary.topFunctions)
        console.log(`  ${(f.share * 100).toFixed(1).padStart(5)} %  ${f.fn}  [${f.place}]`);
    }
  }
}
