import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { AppProcess } from './support/app-process';
import { Harness } from './support/harness';

// The dashboard and the alert rules are only as good as the metrics they name: every one must be
// on the /metrics of a real API or worker process. Prometheus and Grafana cannot run here (no
// Docker engine), so their files are checked against what the processes actually serve.
const root = path.resolve(__dirname, '..');
const deploy = (...parts: string[]) => path.join(root, 'deploy', ...parts);

let h: Harness;
const processes: AppProcess[] = [];
let served: { api: string; worker: string };

before(async () => {
  h = await Harness.start({ worker: false });
  const api = await AppProcess.startApi(h);
  processes.push(api);
  const worker = await AppProcess.startWorker(h);
  processes.push(worker);
  const workerMetrics = String(worker.logs('worker polling')[0]?.metrics);
  served = {
    api: await (await fetch(api.metricsUrl)).text(),
    worker: await (await fetch(workerMetrics)).text(),
  };
});

after(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await h?.close();
});

/** Series names a /metrics page serves: each `# TYPE`, with a histogram's and a summary's own series. */
function seriesNames(page: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of page.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name!);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(`${name}${suffix}`);
  }
  return names;
}

const metricsIn = (expr: string) => [...expr.matchAll(/\breplyonce_[a-z0-9_]+/g)].map((m) => m[0]);

interface Panel {
  type: string;
  title: string;
  datasource?: { uid: string };
  targets?: Array<{ expr: string }>;
}
const dashboard = JSON.parse(readFileSync(deploy('grafana', 'dashboards', 'replyonce.json'), 'utf8')) as {
  uid: string;
  panels: Panel[];
};
const graphs = dashboard.panels.filter((p) => p.type !== 'row');
const rules = (
  parse(readFileSync(deploy('prometheus', 'alerts.yml'), 'utf8')) as {
    groups: Array<{ rules: Array<{ alert: string; expr: string; for?: string }> }>;
  }
).groups.flatMap((g) => g.rules);

function assertServed(where: string, expr: string) {
  const names = new Set([...seriesNames(served.api), ...seriesNames(served.worker)]);
  const named = metricsIn(expr);
  assert.ok(named.length > 0, `${where} names a replyonce metric: ${expr}`);
  for (const metric of named) assert.ok(names.has(metric), `${where}: ${metric} is on neither /metrics`);
}

test('every metric the dashboard names is on the API’s or the worker’s /metrics', () => {
  assert.ok(graphs.length >= 10, 'the dashboard has its panels');
  for (const panel of graphs) {
    assert.ok(panel.targets?.length, `${panel.title} has queries`);
    for (const target of panel.targets) assertServed(`panel "${panel.title}"`, target.expr);
  }
});

test('the dashboard covers the webhooks, the intake, workflow outcomes, replays, provider errors and the watchdog', () => {
  const all = graphs.flatMap((p) => p.targets ?? []).map((t) => t.expr);
  for (const metric of [
    'replyonce_webhooks_total',
    'replyonce_webhook_ack_seconds_bucket',
    'replyonce_intake_backlog',
    'replyonce_intake_oldest_unstarted_seconds',
    'replyonce_workflow_outcomes_total',
    'replyonce_operations_total',
    'replyonce_provider_errors_total',
    'replyonce_webhook_endpoint_disabled',
  ])
    assert.ok(
      all.some((expr) => metricsIn(expr).includes(metric)),
      `a panel shows ${metric}`,
    );
});

test('every metric the alert rules name is served, and the five alerts exist', () => {
  for (const rule of rules) assertServed(`alert ${rule.alert}`, rule.expr);
  assert.deepEqual(rules.map((r) => r.alert).sort(), [
    'ReplyonceIntakeBacklogNotDraining',
    'ReplyonceIntakeDeadLetter',
    'ReplyonceNonRetryableFailure',
    'ReplyonceUnansweredMessage',
    'ReplyonceWebhookDisabled',
  ]);
});

test('the unanswered-messages gauge is read from Temporal: its visibility query is accepted', () => {
  const value = /^replyonce_unanswered_messages (\S+)$/m.exec(served.worker)?.[1];
  assert.equal(value, '0', 'a number (NaN would mean the count failed)');
});

test('Prometheus scrapes the compose services on their ports; Grafana reads the same data source; the files are mounted', () => {
  const prometheus = parse(readFileSync(deploy('prometheus', 'prometheus.yml'), 'utf8')) as {
    rule_files: string[];
    scrape_configs: Array<{ job_name: string; static_configs: Array<{ targets: string[] }> }>;
  };
  const targets = prometheus.scrape_configs.flatMap((c) => c.static_configs.flatMap((s) => s.targets));
  const compose = parse(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8')) as {
    services: Record<string, { profiles?: string[]; volumes?: string[]; environment?: Record<string, string> }>;
  };
  // The API's metrics listener of its own (API_METRICS_PORT), never its public PORT.
  assert.ok(targets.includes(`api:${compose.services.api?.environment?.API_METRICS_PORT}`), 'the API target');
  assert.ok(!targets.includes(`api:${compose.services.api?.environment?.PORT}`), 'not the public port');
  assert.ok(targets.includes(`worker:${compose.services.worker?.environment?.METRICS_PORT}`), 'the worker target');

  const datasources = parse(
    readFileSync(deploy('grafana', 'provisioning', 'datasources', 'datasources.yml'), 'utf8'),
  ) as { datasources: Array<{ uid: string; type: string }> };
  const prometheusUid = datasources.datasources.find((d) => d.type === 'prometheus')?.uid;
  for (const panel of graphs) assert.equal(panel.datasource?.uid, prometheusUid, `${panel.title}'s data source`);

  for (const name of ['prometheus', 'grafana', 'jaeger']) {
    const service = compose.services[name];
    assert.deepEqual(service?.profiles, ['observability'], `${name} is behind the observability profile`);
    for (const volume of service.volumes ?? []) {
      const source = volume.split(':')[0]!;
      assert.ok(existsSync(path.join(root, source)), `${name} mounts ${source}, which exists`);
    }
  }
  for (const file of prometheus.rule_files)
    assert.ok(
      compose.services.prometheus?.volumes?.some((v) => v.endsWith(`:${file}:ro`)),
      `${file} is mounted into Prometheus`,
    );
});
