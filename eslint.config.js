// The lint rules live in the `@tollgate/lint` workspace package (`lint/eslint.config.js`).
export { default } from "@tollgate/lint"
