import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { parse } from 'yaml';
import { loadApiConfig, loadWorkerConfig } from '../lib/config';

// docker-compose.yml cannot be run here (no Docker engine), so this checks it against what the
// app actually reads: every service present, wired to each other, and each app process's
// environment accepted by the same validation the process runs at start-up.
const root = path.resolve(__dirname, '..');
const file = path.join(root, 'docker-compose.yml');
interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  healthcheck?: { test: string[] };
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
}
const compose = parse(readFileSync(file, 'utf8')) as { services: Record<string, Service> };
const service = (name: string): Service => {
  const found = compose.services[name];
  assert.ok(found, `service ${name} exists`);
  return found;
};

/** `${VAR:?msg}` and `${VAR:-default}` as compose resolves them, with test values for the required ones. */
function resolved(environment: Record<string, string> = {}): NodeJS.ProcessEnv {
  const given: Record<string, string> = {
    AGENTMAIL_API_KEY: 'am_test',
    AGENTMAIL_WEBHOOK_SECRET: 'whsec_dGVzdHNlY3JldC10ZXN0c2VjcmV0LTI0',
  };
  return Object.fromEntries(
    Object.entries(environment).map(([key, value]) => [
      key,
      String(value).replace(
        /\$\{(\w+)(?::([?-])([^}]*))?\}/g,
        (_m, name: string, kind?: string, rest?: string) => given[name] ?? (kind === '-' ? (rest ?? '') : ''),
      ),
    ]),
  );
}

test('compose has Postgres, a Postgres-backed Temporal, its Web UI, a one-shot set-up, the api and the worker', () => {
  assert.match(String(service('postgresql').image), /^postgres:/);
  assert.match(String(service('temporal').image), /^temporalio\/auto-setup:1\.29/);
  assert.equal(service('temporal').environment?.DB, 'postgres12');
  assert.equal(service('temporal').environment?.POSTGRES_SEEDS, 'postgresql');
  assert.match(String(service('temporal-ui').image), /^temporalio\/ui:/);
  assert.equal(service('temporal-ui').environment?.TEMPORAL_ADDRESS, 'temporal:7233');
  for (const name of ['setup', 'api', 'worker']) assert.ok(service(name).build, `${name} is built from the Dockerfile`);
  assert.deepEqual(service('setup').command, ['sh', '-c', 'npm run temporal:setup && npm run db:migrate']);
  assert.equal(service('api').depends_on?.setup?.condition, 'service_completed_successfully');
  assert.equal(service('worker').depends_on?.setup?.condition, 'service_completed_successfully');
});

test("Temporal reads the repository's dynamic config: eager activity dispatch on", () => {
  const temporal = service('temporal');
  const mount = (temporal.volumes ?? [])
    .map((v) => v.split(':'))
    .find(([, target]) => target === '/etc/temporal/config/dynamicconfig');
  assert.ok(mount, 'the dynamic config folder is mounted where the image looks');
  const file = path.join(root, mount[0]!, path.basename(String(temporal.environment?.DYNAMIC_CONFIG_FILE_PATH)));
  assert.equal(path.dirname(String(temporal.environment?.DYNAMIC_CONFIG_FILE_PATH)), 'config/dynamicconfig');
  const config = parse(readFileSync(file, 'utf8')) as Record<string, Array<{ value: unknown }>>;
  assert.deepEqual(config['system.enableActivityEagerExecution'], [{ value: true }]);
});

test('every long-running service has a health check', () => {
  for (const name of ['postgresql', 'temporal', 'api', 'worker'])
    assert.ok(service(name).healthcheck?.test.length, name);
  assert.match(service('api').healthcheck!.test.join(' '), /\/readyz/);
});

test("the api's and worker's environments pass the processes' own start-up validation and point at the compose services", () => {
  const api = loadApiConfig(resolved(service('api').environment));
  const worker = loadWorkerConfig(resolved(service('worker').environment));
  for (const config of [api, worker]) {
    assert.equal(config.temporal.address, 'temporal:7233');
    assert.equal(config.TEMPORAL_NAMESPACE, 'replyonce');
    assert.equal(new URL(config.DATABASE_URL).hostname, 'postgresql');
  }
  assert.equal(api.HOST, '0.0.0.0', 'reachable from outside its container');
  assert.ok(service('api').ports?.includes(`${api.PORT}:${api.PORT}`));
  assert.equal(worker.METRICS_HOST, '0.0.0.0');
  assert.ok(service('worker').ports?.includes(`${worker.METRICS_PORT}:${worker.METRICS_PORT}`));
  assert.equal(worker.AGENTMAIL_BASE_URL, undefined, 'unset means AgentMail production');
  assert.equal(service('setup').environment?.DATABASE_URL, service('api').environment?.DATABASE_URL);
});

test('the commands run files the build produces', () => {
  const build = JSON.parse(readFileSync(path.join(root, 'tsconfig.build.json'), 'utf8')) as { include: string[] };
  for (const name of ['api', 'worker']) {
    const entry = service(name).command?.[1] ?? '';
    assert.match(entry, /^dist\/(api|worker)\/main\.js$/);
    assert.ok(build.include.includes(entry.split('/')[1]!), `${entry} is compiled by npm run build`);
  }
  const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
  assert.match(dockerfile, /RUN npm run build/);
});

const composeCli = (() => {
  try {
    execFileSync('docker', ['compose', 'version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

test(
  '`docker compose config` accepts the file',
  { skip: composeCli ? false : 'the docker compose plugin is not installed here (no Docker engine on this machine)' },
  () => {
    execFileSync('docker', ['compose', '-f', file, 'config', '--quiet'], {
      env: {
        ...process.env,
        AGENTMAIL_API_KEY: 'x',
        AGENTMAIL_WEBHOOK_SECRET: 'whsec_dGVzdHNlY3JldC10ZXN0c2VjcmV0LTI0',
      },
    });
  },
);
