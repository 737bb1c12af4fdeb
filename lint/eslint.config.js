/**
 * The workspace's lint rules: ESLint's and typescript-eslint's recommended sets, the rules Effect's
 * own repository adds to them (Effect-TS/effect, `eslint.config.mjs`, with `import-x` in place of
 * `import`). Import cycles are checked by `cycles.ts`, which counts type-only imports.
 *
 * Details: this is a workspace package of its own because typescript-eslint parses with the
 * TypeScript 5 compiler API, which TypeScript 7 (the workspace's `tsc`) no longer has; its own
 * `typescript` 5.9 is what its parser resolves. The formatter (dprint, as Effect's repository runs
 * it) is one rule of the same run, `format` below, so `pnpm lint` checks the format too: one
 * ESLint process that parses each file once costs less than a second one for the format (measured
 * on this tree: 57 s for both in one run against 33 s + 45 s for two, on a loaded machine).
 * `pnpm format` applies that rule alone, with `--fix` (`format.config.js`).
 */
import * as effect from "@effect/eslint-plugin"
import js from "@eslint/js"
import { importX } from "eslint-plugin-import-x"
import sortDestructureKeys from "eslint-plugin-sort-destructure-keys"
import tseslint from "typescript-eslint"

/** @type {import("eslint").Linter.Config["ignores"]} */
export const ignores = ["**/dist/**", "**/node_modules/**", "**/fixtures/**", "tarballs/**", "**/*.md", "**/*.mjs", "**/*.js", "**/*.cjs"]

/** @type {import("eslint").Linter.Config} */
export const typescript = {
  files: ["**/*.ts"],
  languageOptions: { parser: tseslint.parser, ecmaVersion: 2022, sourceType: "module" }
}

/** The line width the code is written to (Effect's own is 120). */
export const lineWidth = Number(process.env["TOLLGATE_FORMAT_LINE_WIDTH"] ?? 140)

/**
 * The formatter: dprint's TypeScript plugin through `@effect/eslint-plugin`'s `@effect/dprint`
 * rule, with Effect's settings but for the line width and braces, kept as they are.
 *
 * @type {Array<import("eslint").Linter.Config>}
 */
export const format = [
  // Effect's config applies to every file ESLint reads; typescript-eslint's adds `.mts` ones.
  ...effect.configs.dprint.map((config) => ({ ...config, files: ["**/*.ts"] })),
  {
    files: ["**/*.ts"],
    rules: {
      "@effect/dprint": ["error", {
        config: {
          indentWidth: 2,
          lineWidth,
          semiColons: "asi",
          quoteStyle: "alwaysDouble",
          trailingCommas: "never",
          operatorPosition: "maintain",
          "arrowFunction.useParentheses": "force",
          // Where Effect's settings would rewrite most files of this tree: a one-line `if` stays one line.
          "ifStatement.useBraces": "maintain",
          "forStatement.useBraces": "maintain",
          "forOfStatement.useBraces": "maintain",
          "forInStatement.useBraces": "maintain",
          "whileStatement.useBraces": "maintain"
        }
      }]
    }
  }
]

export default tseslint.config(
  { ignores },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  typescript,
  {
    files: ["**/*.ts"],
    plugins: { "import-x": importX, "sort-destructure-keys": sortDestructureKeys },
    rules: {
      // The rules Effect's repository sets on top of the recommended ones.
      "no-fallthrough": "off",
      "no-irregular-whitespace": "off",
      "object-shorthand": "error",
      "prefer-destructuring": "off",
      "sort-imports": "off",
      "no-restricted-syntax": ["error", {
        selector: "CallExpression[callee.property.name='push'] > SpreadElement.arguments",
        message: "Do not use spread arguments in Array.push"
      }],
      "no-unused-vars": "off",
      "require-yield": "off",
      "prefer-rest-params": "off",
      "prefer-spread": "off",
      "import-x/first": "error",
      "import-x/newline-after-import": "error",
      "import-x/no-duplicates": "error",
      "sort-destructure-keys/sort-destructure-keys": "error",
      "@typescript-eslint/array-type": ["warn", { default: "generic", readonly: "generic" }],
      "@typescript-eslint/no-non-null-assertion": "off",
      "@typescript-eslint/no-explicit-any": "off",
      "@typescript-eslint/no-empty-object-type": "off",
      "@typescript-eslint/no-unsafe-function-type": "off",
      "@typescript-eslint/no-wrapper-object-types": "off",
      "@typescript-eslint/consistent-type-imports": ["warn", { fixStyle: "inline-type-imports" }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/ban-ts-comment": "off",
      "@typescript-eslint/explicit-function-return-type": "off",
      "@typescript-eslint/explicit-module-boundary-types": "off",
      "@typescript-eslint/no-array-constructor": "off",
      "@typescript-eslint/no-use-before-define": "off",
      "@typescript-eslint/no-namespace": "off"
    }
  },
  {
    files: ["packages/*/src/**/*.ts"],
    rules: { "no-console": "error" }
  },
  ...format
)
