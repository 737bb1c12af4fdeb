/**
 * The route table: the routes' methods and path patterns, indexed once at startup, and the one
 * lookup a request makes. A static path wins over a pattern that also matches it, as in
 * `find-my-way`, and a `HEAD` request is served by the path's `GET` route when it has no `HEAD`
 * route of its own.
 *
 * **Details**
 *
 * A static path (no `:param`) is found by one map lookup; the patterns with parameters are few and
 * are tried in the order the routes were listed. tollgate's own table instead of `HttpRouter`'s
 * `find-my-way`: the routes are a short fixed list, so a map and a few segment comparisons find
 * them, and the request's parameters, pattern and the methods allowed on its path (for the 405)
 * come from the same lookup (docs/benchmarks.md).
 *
 * @since 0.1.0
 */

/**
 * The routes sharing one path pattern, by method.
 *
 * @category models
 */
export interface PathEntry<A> {
  readonly pattern: string
  readonly byMethod: ReadonlyMap<string, A>
  /** The pattern's segments when it has parameters. */
  readonly segments: ReadonlyArray<string> | undefined
}

/**
 * What a lookup finds: the route of the method when there is one, the pattern of the path and the
 * methods the path allows otherwise.
 *
 * @category models
 */
export type Match<A> =
  | { readonly _tag: "Found"; readonly value: A; readonly pattern: string; readonly params: Readonly<Record<string, string>> }
  | { readonly _tag: "MethodNotAllowed"; readonly allow: ReadonlyArray<string> }
  | { readonly _tag: "NotFound" }

/** @category models */
export interface RouteTable<A> {
  readonly lookup: (method: string, url: string) => Match<A>
}

const noParams: Readonly<Record<string, string>> = Object.freeze({})

const notFound: Match<never> = { _tag: "NotFound" }

/**
 * The path of a request URL: the query and fragment cut off, repeated slashes folded into one (as
 * `HttpRouter` did).
 */
const pathOf = (url: string): string => {
  let end = url.length
  const query = url.indexOf("?")
  if (query !== -1) end = query
  const hash = url.indexOf("#")
  if (hash !== -1 && hash < end) end = hash
  const path = end === url.length ? url : url.slice(0, end)
  return path.includes("//") ? path.replace(/\/{2,}/g, "/") : path
}

const decode = (segment: string): string | undefined => {
  if (!segment.includes("%")) return segment
  try {
    return decodeURIComponent(segment)
  } catch {
    return undefined
  }
}

/** The parameters of a path split at `/` under a pattern's segments, or `undefined` when it does not match. */
const matchSegments = (segments: ReadonlyArray<string>, actual: ReadonlyArray<string>): Record<string, string> | undefined => {
  if (actual.length !== segments.length) return undefined
  let params: Record<string, string> | undefined
  for (let i = 0; i < segments.length; i++) {
    const expected = segments[i]!
    const segment = actual[i]!
    if (expected.charCodeAt(0) === 58 /* : */) {
      const value = segment === "" ? undefined : decode(segment)
      if (value === undefined) return undefined
      params ??= {}
      params[expected.slice(1)] = value
    } else if (expected !== segment) {
      return undefined
    }
  }
  return params ?? {}
}

const methodOf = <A>(entry: PathEntry<A>, method: string): A | undefined =>
  entry.byMethod.get(method) ?? (method === "HEAD" ? entry.byMethod.get("GET") : undefined)

/**
 * Indexes routes given as `[method, pattern, value]`. A pattern listed twice with the same method
 * keeps the first.
 *
 * @category constructors
 */
export const make = <A>(routes: Iterable<readonly [method: string, pattern: string, value: A]>): RouteTable<A> => {
  const byPattern = new Map<string, { pattern: string; byMethod: Map<string, A>; segments: ReadonlyArray<string> | undefined }>()
  for (const [method, pattern, value] of routes) {
    let entry = byPattern.get(pattern)
    if (entry === undefined) {
      entry = { pattern, byMethod: new Map(), segments: pattern.includes("/:") ? pattern.split("/") : undefined }
      byPattern.set(pattern, entry)
    }
    if (!entry.byMethod.has(method)) entry.byMethod.set(method, value)
  }
  const statics = new Map<string, PathEntry<A>>()
  const dynamics: Array<PathEntry<A> & { readonly segments: ReadonlyArray<string> }> = []
  for (const entry of byPattern.values()) {
    if (entry.segments === undefined) statics.set(entry.pattern, entry)
    else dynamics.push(entry as PathEntry<A> & { readonly segments: ReadonlyArray<string> })
  }
  // What a static path's lookup answers, made once per path and method (HEAD included).
  const staticFound = new Map<PathEntry<A>, Map<string, Match<A>>>()
  for (const entry of statics.values()) {
    const found = new Map<string, Match<A>>()
    for (const method of [...entry.byMethod.keys(), "HEAD"]) {
      const value = methodOf(entry, method)
      if (value !== undefined) found.set(method, { _tag: "Found", value, pattern: entry.pattern, params: noParams })
    }
    staticFound.set(entry, found)
  }
  // A pattern whose only parameter is its last segment (`/api/v1/crypto/rpc/:network`, the paid RPC
  // route) is matched by its prefix, without splitting the path.
  const trailing = dynamics.map((entry) => {
    const params = entry.segments.filter((segment) => segment.startsWith(":"))
    const last = entry.segments[entry.segments.length - 1]!
    return params.length === 1 && last.startsWith(":")
      ? { prefix: entry.segments.slice(0, -1).join("/") + "/", name: last.slice(1) }
      : undefined
  })

  const lookup = (method: string, url: string): Match<A> => {
    const path = pathOf(url)
    const fixed = statics.get(path)
    if (fixed !== undefined) {
      const found = staticFound.get(fixed)!.get(method)
      if (found !== undefined) return found
    }
    let allow: Array<string> | undefined = fixed === undefined ? undefined : [...fixed.byMethod.keys()]
    let actual: Array<string> | undefined
    for (let i = 0; i < dynamics.length; i++) {
      const entry = dynamics[i]!
      const byPrefix = trailing[i]
      let params: Record<string, string> | undefined
      if (byPrefix !== undefined) {
        if (!path.startsWith(byPrefix.prefix) || path.length === byPrefix.prefix.length || path.indexOf("/", byPrefix.prefix.length) !== -1)
          continue
        const value = decode(path.slice(byPrefix.prefix.length))
        if (value === undefined) continue
        params = { [byPrefix.name]: value }
      } else {
        actual ??= path.split("/")
        params = matchSegments(entry.segments, actual)
        if (params === undefined) continue
      }
      const value = methodOf(entry, method)
      if (value !== undefined) return { _tag: "Found", value, pattern: entry.pattern, params }
      allow ??= []
      for (const allowed of entry.byMethod.keys()) if (!allow.includes(allowed)) allow.push(allowed)
    }
    return allow === undefined ? notFound : { _tag: "MethodNotAllowed", allow }
  }
  return { lookup }
}
