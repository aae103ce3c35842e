// Lint as the Temporal samples do: typescript-eslint's type-checked rules, floating promises an
// error, and workflow code kept deterministic by what it may import. Formatting is Prettier's.
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

/**
 * What every step of activities/ may not import, whatever else its folder allows: a later block's
 * no-restricted-imports replaces an earlier one's for the same files (ESLint does not merge rule
 * options), so the rehearsal's stricter block repeats these through the constants, not by copy.
 */
const STEP_LAYER_PATTERNS = [
  {
    regex: '^(\\.\\./)+(api|worker|scripts|sandbox|bench|test)(/|$)',
    message: 'activities/ and intake/ sit below the processes: they never import api/, worker/ or scripts/.',
  },
  {
    regex: '^(\\.\\./)+workflows(/|$)',
    message: 'The contract is contract/: activities never import workflow code.',
  },
];
const STEP_NOT_FACTORY_PATTERN = {
  regex: '^\\.\\./index$',
  message: 'A step does not import the activities factory.',
};

/** The import rule of workflow code for `files`, whose way up to the project root is `up` (a regex). */
function workflowImports(files, up) {
  return {
    files,
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: builtinModules
            .flatMap((name) => [name, `node:${name}`])
            .map((name) => ({ name, message: 'Node built-ins are not deterministic: do the work in an activity.' })),
          patterns: [
            {
              regex: '^(?!@temporalio/(workflow|common)(/|$)|\\.{1,2}/)',
              message: 'Workflow code may import @temporalio/workflow, @temporalio/common and contract/ only.',
              allowTypeImports: true,
            },
            {
              regex: `^${up}(?!contract(/|$))`,
              message: 'Workflow code imports contract/ only (activities through proxies: their types only).',
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  };
}

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', '.data/', 'bench/results/', 'test-artifacts/', '**/*.js', '**/*.cjs'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['eslint.config.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // node:test's describe/test return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['describe', 'test', 'it', 'suite', 'before', 'after', 'beforeEach', 'afterEach'],
            },
          ],
        },
      ],
      // Fastify handlers and hooks are async to return their answer; an await is not required there.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
    },
  },
  // Workflow code is replayed: no I/O, no clocks, no randomness but Temporal's. Only the workflow
  // SDK, @temporalio/common and the pure contract may be imported (types are free). `up` is the
  // relative path from the files to the project root (workflows/interceptors/ sits one deeper).
  workflowImports(['workflows/*.ts'], '\\.\\./'),
  workflowImports(['workflows/interceptors/**/*.ts'], '\\.\\./\\.\\./'),
  {
    // The contract is the bottom of the graph: pure, deterministic, and free of anything of ours.
    files: ['contract/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: builtinModules
            .flatMap((name) => [name, `node:${name}`])
            .map((name) => ({ name, message: 'contract/ is imported by workflow code: no Node built-ins.' })),
          patterns: [
            {
              regex: '^(?!@temporalio/(workflow|common)(/|$)|@noble/hashes(/|$)|html-tag-names$|\\./)',
              message: 'contract/ imports nothing of ours and only pure packages: everything else imports it.',
            },
          ],
        },
      ],
    },
  },
  {
    // The import graph flows api/worker/scripts → intake/workflows/activities → lib → contract, never back up.
    files: ['lib/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./(api|worker|scripts|intake|workflows|activities|knowledge|sandbox|bench|test)(/|$)',
              message: 'lib/ is infrastructure: it imports contract/ and nothing else of the project above it.',
            },
          ],
        },
      ],
    },
  },
  {
    // review/ (reviewers' credentials, the audit) sits beside lib/: the api, the activities and the CLI call it.
    files: ['review/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./(api|worker|scripts|intake|workflows|activities|sandbox|bench|test|knowledge|desk)(/|$)',
              message: 'review/ imports lib/ and contract/ only.',
            },
          ],
        },
      ],
    },
  },
  {
    // The knowledge base (sync, retrieval, the eval's arithmetic) sits beside lib/: the draft step,
    // the worker and the CLIs import it; it imports contract/ and lib/ only.
    files: ['knowledge/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./(api|worker|scripts|intake|workflows|activities|sandbox|bench|test|review|desk)(/|$)',
              message: 'knowledge/ imports contract/ and lib/ only.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['activities/**/*.ts', 'intake/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+(api|worker|scripts|sandbox|bench|test)(/|$)',
              message: 'activities/ and intake/ sit below the processes: they never import api/, worker/ or scripts/.',
            },
            {
              regex: '^(\\.\\./)+workflows(/|$)',
              message: 'The contract is contract/: activities and intake never import workflow code.',
            },
          ],
        },
      ],
    },
  },
  {
    // One folder per workflow step. A step imports contract/, lib/ and the shared folders
    // (operation-store/, agentmail/, failures/); of another step only what that step publishes:
    // the stored draft (draft/draft-store, which the send sends) and the budget's table
    // (decide/reply-budget, which retention prunes).
    files: ['activities/*/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...STEP_LAYER_PATTERNS,
            {
              regex: '^(\\.\\./)+(decide|draft|ticket|send|turns|upkeep|notify)/(?!draft-store$|reply-budget$)',
              message:
                "A step's folder imports contract/, lib/, operation-store/, agentmail/ and failures/ only; move what two steps share there.",
            },
            STEP_NOT_FACTORY_PATTERN,
          ],
        },
      ],
    },
  },
  {
    // intake/ and activities/ are one layer: only upkeep/ calls across it, because the webhook
    // watchdog's recovery *is* intake's catch-up (it hands missed messages over like any other entry).
    files: ['activities/**/*.ts'],
    ignores: ['activities/upkeep/**'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+intake(/|$)',
              message:
                "Only activities/upkeep/ (the watchdog's catch-up) imports intake/: a step hands work over through its workflow.",
            },
          ],
        },
      ],
    },
  },
  {
    // The processes (api/, desk/) sit at the top, beside worker/ and scripts/: they may read what the
    // layers below publish (intake/, review/, knowledge/, the operation store and the stored draft),
    // but never import another process, and never workflow code (its types only).
    files: ['api/**/*.ts', 'desk/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^(\\.\\./)+(worker|scripts|sandbox|bench|test)(/|$)',
              message:
                'api/ and desk/ are processes: what two processes share belongs in lib/ (or the layer that owns it).',
            },
            {
              regex: '^(\\.\\./)+workflows(/|$)',
              message: 'Processes talk to workflows through Temporal and contract/, never by importing workflow code.',
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  {
    files: ['api/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^(\\.\\./)+desk(/|$)', message: 'api/ and desk/ are separate processes.' }] },
      ],
    },
  },
  {
    files: ['desk/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^(\\.\\./)+api(/|$)', message: 'api/ and desk/ are separate processes.' }] },
      ],
    },
  },
  {
    // The rehearsal (docs/rehearsal.md) diverts every outward effect by construction: of the other
    // steps it may import only what decides and drafts without an effect — the reply policy, our
    // own addresses (a read), the drafter, the draft rules and the stored draft's check — never the
    // send, the labels, AgentMail drafts, tickets, notifications, the budget or the live decision.
    files: ['activities/rehearsal/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...STEP_LAYER_PATTERNS,
            {
              regex:
                '^(\\.\\./)+(decide|draft|ticket|send|turns|upkeep|notify|operation-store)/(?!(decide/)?(reply-policy|own-addresses)$|(draft/)?(draft-check|draft-request|draft-store|drafting/answer|drafting/drafter|customer-mail|attachment-reader|compose-draft)$)',
              message:
                "A rehearsal reaches no outward effect: it imports the reply policy, own-addresses, the drafter, the draft rules, the draft sequence (compose-draft) and the reading of the customer's mail only (never send/, ticket/, notify/, the budget or the live decision).",
            },
            STEP_NOT_FACTORY_PATTERN,
          ],
        },
      ],
    },
  },
  {
    // Tests read JSON answers and untyped workflow results, then assert on them field by field:
    // an `any` there is checked by the assertion itself.
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    files: ['eslint.config.mjs'],
    extends: [tseslint.configs.disableTypeChecked],
  },
  prettier,
);
