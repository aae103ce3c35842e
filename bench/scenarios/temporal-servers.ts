import { Client, Connection } from '@temporalio/client';
import type { BenchContext } from '../support/context';
import { NAMESPACE, type Environment } from '../support/environment';
import { startOurSide, startStartOnlySide } from '../support/sides';
import { oneLoad, warmUpEndToEnd, type EndToEndFigures } from './end-to-end';
import { search, warmUp, type SearchFigures } from './ingress';

/**
 * Scenario 8 (`--temporal both`): the same unique-path and end-to-end runs on the Temporal dev
 * server (one process, in memory) and on Temporal's own server on Postgres with SQL visibility
 * and mTLS (the stack's), in the same run, the order alternating by repeat so the machine's
 * drift hits both alike. Both servers stay up for the whole run: the idle one costs a little CPU
 * (its housekeeping) while the other is measured, the same for both.
 *
 * Per server and repeat: the Temporal start alone (no worker: the server's ceiling), ours with
 * its worker (the highest rate with ack p99 < 100 ms), then a fresh API and worker for the
 * end-to-end runs at 1×, 4× and 16×. The first two mostly measure latency (their drain is about
 * their arrival window); the 16× load arrives faster than two cores answer, so its drain is the
 * capacity of the whole path on that server.
 */

export type ServerKind = 'dev' | 'stack';

export interface ServerFigures {
  server: ServerKind;
  repeat: number;
  startOnly: SearchFigures;
  ours: SearchFigures;
  endToEnd: EndToEndFigures[];
}

export async function runTemporalServers(
  context: BenchContext,
  servers: Record<ServerKind, Environment>,
): Promise<ServerFigures[]> {
  const results: ServerFigures[] = [];
  const { repeats } = context.options;
  const [oneX, fourX, sixteenX] = context.options.e2e.messages;
  for (let repeat = 0; repeat < repeats; repeat++) {
    const order: ServerKind[] = repeat % 2 === 0 ? ['dev', 'stack'] : ['stack', 'dev'];
    for (const server of order) {
      const env = servers[server];
      // A clean dev server per repeat, as everywhere; the stack keeps its databases (a fresh one
      // would rebuild them), and every run uses a task queue of its own.
      if (repeat > 0) await env.freshTemporal();
      const on: BenchContext = { ...context, env };
      context.log(
        `servers repeat ${repeat + 1}/${repeats}: ${server === 'dev' ? 'the dev server' : 'Temporal on Postgres'}`,
      );

      const startOnlySide = await startStartOnlySide(on);
      let startOnly: SearchFigures;
      try {
        await warmUp(on, startOnlySide);
        startOnly = await search(on, startOnlySide, repeat, false);
      } finally {
        await startOnlySide.stop();
      }

      const oursSide = await startOurSide(on);
      let ours: SearchFigures;
      try {
        await warmUp(on, oursSide);
        ours = await search(on, oursSide, repeat);
        // Its backlog drained, so the end-to-end runs below start on an idle server.
        if (!(await oursSide.settle(120_000)))
          context.log(`  ${server}: the search's workflows had not all finished after 120 s`);
      } finally {
        await oursSide.stop();
      }

      const endToEnd: EndToEndFigures[] = [];
      const side = await startOurSide(on);
      const connection = await Connection.connect({ address: on.env.temporalAddress });
      const client = new Client({ connection, namespace: NAMESPACE });
      try {
        await warmUpEndToEnd(on, side);
        endToEnd.push(await oneLoad(on, side, repeat, '1×', oneX, client));
        endToEnd.push(await oneLoad(on, side, repeat, '4×', fourX, client));
        endToEnd.push(await oneLoad(on, side, repeat, '16×', sixteenX, client));
      } finally {
        await connection.close();
        await side.stop();
      }
      results.push({ server, repeat, startOnly, ours, endToEnd });
    }
  }
  return results;
}
