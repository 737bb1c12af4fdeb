/**
 * The formatter, as Effect's repository runs it: dprint's TypeScript plugin through
 * `@effect/eslint-plugin`'s `@effect/dprint` rule, with Effect's settings but for the line width
 * (the one the code is written to) and braces, kept as they are. `pnpm format` rewrites the files, `pnpm format:check`
 * lists what it would change.
 */
import * as effect from "@effect/eslint-plugin"
import { ignores, typescript } from "./eslint.config.js"

export const lineWidth = Number(process.env["TOLLGATE_FORMAT_LINE_WIDTH"] ?? 140)

export default [
  { ignores },
  // The lint rules' disable comments are not this config's to judge.
  { linterOptions: { reportUnusedDisableDirectives: "off" } },
  typescript,
  ...effect.configs.dprint,
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
