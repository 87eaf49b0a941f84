// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

// The house's rules on imports (docs/architecture.md): which folder may import which. Paths are
// relative to this file. Test files (*.test.ts, test/) are exempt from the zones: a test may start
// the sandbox's parts or read files.

/** Every folder of src/ whose code runs in the operator, the rate-limit service or the kubectl plugin. */
const RUNTIME = [
  'acme',
  'api',
  'certificates',
  'controller',
  'controllers',
  'dns',
  'domain',
  'kube',
  'kubectl-plugin',
  'observability',
  'ratelimit',
  'release',
  'routing',
  'serving',
].map((dir) => `./src/${dir}`);

/**
 * The data planes' modules (src/data-planes/): pure, but the `sandbox*.ts` files, each folder's
 * (`sandbox.ts`, and `sandbox-process.ts`, the processes it starts) and the top folder's (registry,
 * types), which start processes for `portico sandbox` (development only), and the `attacher*.ts`
 * files, each folder's rate-limit attacher and the top folder's registry of them, which do the I/O
 * of RateLimitPolicy attachment at the controllers' level.
 */
const DATA_PLANES_RUNTIME = [
  './src/data-planes/!(sandbox*|attacher*).ts',
  './src/data-planes/*/!(sandbox*|attacher*).ts',
];
const DATA_PLANES_SANDBOX = './src/data-planes/**/sandbox*.ts';
const DATA_PLANES_ATTACHERS = './src/data-planes/**/attacher*.ts';

/** The pure folders and files: decisions over values, no Kubernetes client, no network, no file system. */
const PURE = [
  './src/domain',
  './src/routing',
  ...DATA_PLANES_RUNTIME,
  './src/dns/!(resolver|update-client).ts',
  './src/serving/verdict.ts',
  './src/serving/schedule.ts',
  './src/ratelimit/decision.ts',
  './src/ratelimit/windows.ts',
];

/** What does I/O or runs a process, which a pure file must not import. */
const IMPURE = [
  './src/acme',
  './src/controller',
  './src/controllers',
  './src/kube',
  './src/kubectl-plugin',
  './src/observability',
  './src/release',
  './src/sandbox',
  './src/dns/resolver.ts',
  './src/dns/update-client.ts',
  './src/serving/checker.ts',
  './src/serving/serving-check.ts',
  './src/ratelimit/server',
];

/** The rate-limit service's files that do I/O or hold state (a glob: kept apart from the paths above). */
const IMPURE_RATELIMIT =
  './src/ratelimit/!(decision|windows|limits|config-schema|errors|request-limits|protocol).ts';

/** Node modules and packages that reach the network or the file system, or start processes. */
const IO_MODULES = [
  'fs',
  'node:fs',
  'node:fs/promises',
  'node:child_process',
  'node:http',
  'node:https',
  'node:http2',
  'node:dgram',
  'node:dns',
  'node:dns/promises',
  'node:tls',
  'undici',
  'ioredis',
  '@grpc/grpc-js',
  'acme-client',
].map((name) => ({ name, message: 'A pure file does no I/O (docs/architecture.md): do it in an adapter.' }));

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.sandbox*/', 'coverage/', 'charts/', 'deploy/'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      complexity: ['error', 15],
      'max-depth': ['error', 3],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/explicit-module-boundary-types': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // @kubernetes/client-node models are classes that hold plain data; object literals are how they are built.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      '@typescript-eslint/no-misused-spread': 'off',
    },
  },
  {
    files: ['src/**/*.ts', 'scripts/**/*.ts', 'test/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
    },
    rules: {
      // No import cycles: a cycle makes the order modules initialise in matter. The rule follows value
      // imports only (an `import type` is erased at build, so it cannot change that order).
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // Lines of code (comments and blank lines not counted); test files are exempt (below).
      'max-lines': ['error', { max: 500, skipBlankLines: true, skipComments: true }],
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            {
              target: [...RUNTIME, ...DATA_PLANES_RUNTIME, DATA_PLANES_ATTACHERS],
              from: './src/sandbox',
              message: 'Runtime code never imports the sandbox (a development tool).',
            },
            {
              target: [...RUNTIME, ...DATA_PLANES_RUNTIME, DATA_PLANES_ATTACHERS],
              from: DATA_PLANES_SANDBOX,
              message: "Runtime code never imports a data plane's sandbox part (a development tool).",
            },
            {
              target: ['./src/api', './src/domain'],
              from: './src/!(api|domain)/**',
              message: 'api/ and domain/ are the foundation: they import only each other.',
            },
            {
              target: PURE,
              from: IMPURE,
              message: 'A pure file imports only pure code (docs/architecture.md).',
            },
            {
              target: PURE,
              from: IMPURE_RATELIMIT,
              message: 'A pure file imports only pure code (docs/architecture.md).',
            },
            {
              target: PURE,
              from: DATA_PLANES_ATTACHERS,
              message: 'A pure file imports only pure code (docs/architecture.md).',
            },
            {
              target: [
                './src/kube',
                './src/observability',
                './src/certificates',
                './src/dns',
                './src/routing',
                ...DATA_PLANES_RUNTIME,
              ],
              from: [
                './src/acme',
                './src/ratelimit',
                './src/serving',
                './src/controllers',
                './src/controller',
              ],
              message: 'The shared layers never import the features or the processes above them.',
            },
            {
              target: [
                './src/acme',
                './src/ratelimit/*.ts',
                './src/serving',
                './src/controllers',
                DATA_PLANES_ATTACHERS,
              ],
              from: ['./src/controller', './src/ratelimit/server'],
              message:
                "Only a process's main (src/controller/, src/ratelimit/server/) wires the parts together.",
            },
          ],
        },
      ],
    },
  },
  {
    files: PURE.map((p) => `${p.slice(2)}${p.endsWith('.ts') ? '' : '/**/*.ts'}`),
    ignores: ['**/*.test.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          paths: [
            ...IO_MODULES,
            {
              name: '@kubernetes/client-node',
              allowTypeImports: true,
              message: 'A pure file may use the Kubernetes types, never the client (docs/architecture.md).',
            },
            {
              name: 'node:net',
              allowImportNames: ['isIP', 'isIPv4', 'isIPv6'],
              message: 'A pure file may parse addresses, never open a socket.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.test.ts', 'test/**/*.ts'],
    rules: { complexity: 'off', 'max-lines': 'off', 'import-x/no-restricted-paths': 'off' },
  },
  { files: ['eslint.config.js'], ...tseslint.configs.disableTypeChecked },
);
