/**
 * What an API key may call, so a key shipped in a front-end or an agent can do only what it is for:
 * `models` (ids, or prefixes ending in `*`), `networks` (RPC slugs), `methods` (JSON-RPC methods),
 * `operations` (the skus of the paid routes and declared endpoints, or prefixes ending in `*`, such
 * as `chat:*`) and `ips` (CIDR ranges or addresses, judged on the client address tollgate derives
 * with its trusted proxies). A key without a list is not restricted in that respect; a call outside
 * them is a 403 naming the restriction, before any credit is held.
 *
 * **Details**
 *
 * The restrictions travel with the key's standing, read before the body (`AuthStore.KeyStatus`), so
 * judging them costs no store round trip: the network and the address are judged before the body is
 * read, the operation, model and methods once the body is decoded and priced. The address ranges
 * are matched by `node:net`'s `BlockList` (IPv4 and IPv6 subnets), not by hand.
 *
 * @since 0.1.0
 */
import { Schema, type SchemaAST } from "effect"
import * as Net from "node:net"
import { Forbidden } from "./Errors.ts"
import * as Networks from "./Networks.ts"

/** How many entries a list may hold. @category constants */
export const MAX_ENTRIES = 100

const entries = (check: SchemaAST.Check<string>) =>
  Schema.optionalKey(
    Schema.Array(Schema.String.check(Schema.isMinLength(1), Schema.isMaxLength(256), check)).check(
      Schema.isMinLength(1),
      Schema.isMaxLength(MAX_ENTRIES)
    )
  )

const anything = Schema.makeFilter((_: string) => true)

const cidrOf = (entry: string): { readonly address: string; readonly bits: number; readonly family: "ipv4" | "ipv6" } | undefined => {
  const [address = "", bits, ...rest] = entry.split("/")
  const version = Net.isIP(address)
  if (version === 0 || rest.length > 0) return undefined
  const max = version === 4 ? 32 : 128
  const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : -1
  if (prefix < 0 || prefix > max) return undefined
  return { address, bits: prefix, family: version === 4 ? "ipv4" : "ipv6" }
}

/**
 * The restrictions of a key, as `POST`/`PATCH /api_keys` and the CLI take them and `GET /api_keys`
 * shows them.
 *
 * @category schemas
 */
export const Restrictions = Schema.Struct({
  models: entries(anything),
  networks: entries(Schema.makeFilter((slug: string) => Networks.findNetwork(slug) !== undefined || `${slug} is not a supported network`)),
  methods: entries(anything),
  operations: entries(anything),
  ips: entries(Schema.makeFilter((entry: string) => cidrOf(entry) !== undefined || `${entry} is not an IP address or CIDR range`))
})

/** @category models */
export type Restrictions = typeof Restrictions.Type

/** @category models */
export type Name = keyof Restrictions

/**
 * Whether `restrictions` restrict anything (an empty object does not).
 *
 * @category predicates
 */
export const isRestricted = (restrictions: Restrictions | undefined): restrictions is Restrictions =>
  restrictions !== undefined && Object.keys(restrictions).length > 0

/** An entry matches a value equal to it, or, ending in `*`, every value it begins. */
const matches = (allowed: ReadonlyArray<string>, value: string): boolean =>
  allowed.some((entry) => entry.endsWith("*") ? value.startsWith(entry.slice(0, -1)) : entry === value)

/**
 * The 403 of a call outside the key's `name` restriction.
 *
 * @category errors
 */
export const refusal = (name: Name, value: string, allowed: ReadonlyArray<string>): Forbidden =>
  new Forbidden({ message: `This API key is restricted: its ${name} restriction allows ${allowed.join(", ")}, not ${value}` })

/** Block lists by their ranges: a key's restrictions are read per request, its ranges parsed once. */
const blockLists = new Map<string, Net.BlockList>()

const blockListOf = (ips: ReadonlyArray<string>): Net.BlockList => {
  const id = ips.join(",")
  let list = blockLists.get(id)
  if (list === undefined) {
    list = new Net.BlockList()
    for (const entry of ips) {
      const cidr = cidrOf(entry)
      if (cidr !== undefined) list.addSubnet(cidr.address, cidr.bits, cidr.family)
    }
    if (blockLists.size >= 1_000) blockLists.delete(blockLists.keys().next().value!)
    blockLists.set(id, list)
  }
  return list
}

/**
 * What can be judged from the request line and headers: the client address and, for an RPC call,
 * the network of its path. `undefined` when the call may go on.
 *
 * @category checks
 */
export const checkRequest = (
  restrictions: Restrictions,
  request: { readonly address: string; readonly network: string | undefined }
): Forbidden | undefined => {
  const { ips, networks } = restrictions
  if (ips !== undefined) {
    const family = Net.isIP(request.address)
    if (family === 0 || !blockListOf(ips).check(request.address, family === 4 ? "ipv4" : "ipv6")) {
      return refusal("ips", request.address, ips)
    }
  }
  if (networks !== undefined && request.network !== undefined && !networks.includes(request.network)) {
    return refusal("networks", request.network, networks)
  }
  return undefined
}

/**
 * What a call's `models` and `methods` restrictions judge of its decoded request: the models it
 * may be served by (its model, and the fallbacks it names), the JSON-RPC methods it calls. A call
 * that names neither is not judged by them.
 *
 * @category models
 */
export interface Subject {
  readonly models?: ReadonlyArray<string> | undefined
  readonly methods?: ReadonlyArray<string> | undefined
}

/**
 * What needs the decoded body: the operation (the call's sku), its model and its JSON-RPC methods.
 * `undefined` when the call may go on.
 *
 * @category checks
 */
export const checkCall = (restrictions: Restrictions, sku: string, subject: Subject | undefined): Forbidden | undefined => {
  const { methods, models, operations } = restrictions
  if (operations !== undefined && !matches(operations, sku)) return refusal("operations", sku, operations)
  const model = models === undefined ? undefined : subject?.models?.find((candidate) => !matches(models, candidate))
  if (model !== undefined) return refusal("models", model, models!)
  if (methods !== undefined && subject?.methods !== undefined) {
    const outside = subject.methods.find((method) => !methods.includes(method))
    if (outside !== undefined) return refusal("methods", outside, methods)
  }
  return undefined
}
