import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { buildApp, type AppOptions } from '../../api/app';
import { createDb, type Db } from '../../lib/db';
import { createLogger } from '../../lib/logger';
import { testEnv } from './env';
import { newWebhookSecret } from './signing';
import { connectClient } from './temporal';

export interface IngressOnly {
  app: FastifyInstance;
  db: Db;
  client: Client;
  secret: string;
  close(): Promise<void>;
}

/**
 * The ingress alone, on the suite's real Temporal and Postgres, for `app.inject`. No worker polls
 * its task queue, so a started workflow stays queued and a test sees exactly what the ingress did.
 */
export async function startIngressOnly(
  options: { bodyLimitBytes: number; webhookSecret?: string } & Partial<
    Pick<AppOptions, 'requestTimeoutMs' | 'maxConcurrentRequests' | 'taskQueue' | 'intake'>
  >,
): Promise<IngressOnly> {
  // A second replica of one deployment shares its secret (and the database).
  const secret = options.webhookSecret ?? newWebhookSecret();
  const db = createDb(testEnv.databaseUrl);
  const { client, connection } = await connectClient();
  const app = buildApp({
    db,
    temporal: client,
    taskQueue: options.taskQueue ?? `ingress-only-${randomUUID()}`,
    webhookSecret: secret,
    deadlineMs: 5_000,
    bodyLimitBytes: options.bodyLimitBytes,
    requestTimeoutMs: options.requestTimeoutMs,
    maxConcurrentRequests: options.maxConcurrentRequests,
    intake: options.intake,
    logger: createLogger('test-api', process.env.TEST_LOG_LEVEL ?? 'silent'),
  });
  await app.ready();
  return {
    app,
    db,
    client,
    secret,
    close: async () => {
      await app.close();
      await connection.close();
      await db.end();
    },
  };
}
