/**
 * The deepest nesting a JSON body may have. `JSON.parse` reads any depth, but what follows does not:
 * echoing a request (`routes/Image.ts`), encoding an upstream body (`ChatBackend`) or decoding with
 * a schema recurse once per level, and from a few thousand levels they overflow the stack, a 500
 * for what is a client's mistake. Every JSON body is checked right after it is parsed, so such a
 * body is a 400 naming the limit before anything else sees it. No request of the API needs more
 * than a few levels; tool definitions of a chat call (JSON Schemas) need a few tens.
 *
 * @since 0.1.0
 */
import { Errors } from "@tollgate/core"

/**
 * The deepest nesting of arrays and objects accepted in a body.
 *
 * @category constants
 */
export const MAX_DEPTH = 64

/**
 * The 400 of a body nested deeper than `MAX_DEPTH`.
 *
 * @category errors
 */
export const tooDeep = new Errors.InvalidRequest({ message: `The JSON body is nested deeper than ${MAX_DEPTH} levels` })

/**
 * Whether `value` (parsed JSON) nests arrays and objects deeper than `MAX_DEPTH`. Iterative, so it
 * cannot overflow the stack itself, and it stops at the first value too deep.
 *
 * @category predicates
 */
export const exceeds = (value: unknown): boolean => {
  if (typeof value !== "object" || value === null) return false
  const values: Array<object> = [value]
  const depths: Array<number> = [1]
  while (values.length > 0) {
    const current = values.pop()!
    const depth = depths.pop()!
    if (depth > MAX_DEPTH) return true
    for (const child of Array.isArray(current) ? current : Object.values(current)) {
      if (typeof child === "object" && child !== null) {
        values.push(child)
        depths.push(depth + 1)
      }
    }
  }
  return false
}
