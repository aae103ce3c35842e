import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { getPriority } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { AppProcess } from './support/app-process';
import { Harness } from './support/harness';

// Start-up as an operator meets it: failures name their cause, and two workers share a host.
let h: Harness;
const processes: AppProcess[] = [];
before(async () => {
  h = await Harness.start({ worker: false });
});
after(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await h.close();
});

/** A port something else already listens on. */
async function occupiedPort(): Promise<{ port: number; close: () => Promise<void> }> {
  const server = http.createServer((_request, response) => response.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** The nice value of every thread of a process (field 19 of /proc/<pid>/task/<tid>/stat). */
function threadNiceValues(pid: number): number[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // After "pid (comm) ": state is field 3, nice field 19.
    return Number(stat.slice(stat.lastIndexOf(') ') + 2).split(' ')[16]);
  });
}

describe('worker start-up', () => {
  test('the worker yields the CPU to the API: every thread, Temporal runtime threads included, runs at WORKER_NICE (default 10); 0 leaves it', async () => {
    // Act
    const lowered = await AppProcess.startWorker(h);
    processes.push(lowered);
    const unchanged = await AppProcess.startWorker(h, { env: { WORKER_NICE: '0' } });
    processes.push(unchanged);

    // Assess: a polling worker has its Rust core and V8 threads besides the main one. A worker
    // inherits this process's nice value (0 unless the suite itself runs under `nice`).
    const inherited = getPriority();
    const loweredThreads = threadNiceValues(lowered.pid as number);
    assert.ok(loweredThreads.length > 4, `only ${loweredThreads.length} threads`);
    assert.deepEqual(new Set(loweredThreads), new Set([Math.max(10, inherited)]));
    assert.equal(lowered.logs('worker polling')[0]?.nice, Math.max(10, inherited));
    assert.deepEqual(new Set(threadNiceValues(unchanged.pid as number)), new Set([inherited]));
  });

  test('WORKER_NICE out of 0–19 stops the worker naming the variable', async () => {
    const worker = AppProcess.spawnWorker(h, { env: { WORKER_NICE: '20' } });
    processes.push(worker);
    const { code } = await worker.exited;
    assert.equal(code, 1);
    assert.match(worker.stderr, /WORKER_NICE/);
  });

  test('a METRICS_PORT that is taken stops the worker with that cause, not a connection clean-up error', async () => {
    // Prepare
    const taken = await occupiedPort();
    try {
      // Act
      const worker = AppProcess.spawnWorker(h, { env: { METRICS_PORT: String(taken.port) } });
      processes.push(worker);
      const { code } = await worker.exited;

      // Assess
      assert.equal(code, 1);
      assert.match(worker.stderr, new RegExp(`METRICS_PORT=${taken.port} on 127\\.0\\.0\\.1 is already in use`));
      assert.doesNotMatch(worker.stderr, /Cannot close connection|Workers hold a reference/);
    } finally {
      await taken.close();
    }
  });

  test('two workers on one host with METRICS_PORT unset both start; the second serves /metrics elsewhere', async () => {
    // Act: the default port (9464) is taken by the first worker, or by anything else on this host.
    const first = await AppProcess.startWorker(h, { env: { METRICS_PORT: '' } });
    processes.push(first);
    const second = await AppProcess.startWorker(h, { env: { METRICS_PORT: '' } });
    processes.push(second);

    // Assess
    const urls = [first, second].map((w) => String(w.logs('worker polling')[0]?.metrics));
    assert.notEqual(urls[0], urls[1]);
    assert.ok(
      second.logLines.some((line) => typeof line.msg === 'string' && line.msg.startsWith('metrics port 9464 is taken')),
    );
    for (const url of urls) {
      const response = await fetch(url);
      assert.equal(response.status, 200);
      assert.match(await response.text(), /replyonce_/);
    }
  });
});
