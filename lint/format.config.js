/**
 * The formatter alone, for `pnpm format` (`--fix`) and `pnpm format:check`: the `format` rule of
 * `eslint.config.js`, which `pnpm lint` checks with the other rules.
 */
import { format, ignores, typescript } from "./eslint.config.js"

export default [
  { ignores },
  // The lint rules' disable comments are not this config's to judge.
  { linterOptions: { reportUnusedDisableDirectives: "off" } },
  typescript,
  ...format
]
