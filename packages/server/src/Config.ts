/**
 * The server's configuration: `TOLLGATE_*` environment variables plus an optional JSON file named
 * by `TOLLGATE_CONFIG` (models, prices, upstreams, accounts). Everything is validated at start; a
 * bad value stops the server with one message naming the field and the rule it broke. With no
 * signing key the server runs in dev mode.
 *
 * @since 0.1.0
 */
import { CreditLedger } from "@tollgate/core"
import { ClientAddress, UploadBudget } from "@tollgate/http"
import { Data, Effect, Schema, SchemaIssue } from "effect"
import * as Fs from "node:fs"
import * as Os from "node:os"

/** @category errors */
export class ConfigError extends Data.TaggedError("ConfigError")<{ readonly message: string }> {}

const Port = Schema.FiniteFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 65535 }))
const PositiveInt = Schema.FiniteFromString.check(Schema.isInt(), Schema.isGreaterThan(0))
const RedisSeeds = /^[A-Za-z0-9.-]+:[0-9]{1,5}(,[A-Za-z0-9.-]+:[0-9]{1,5})*$/u
const RedisSeed = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9.-]+:[0-9]{1,5}$/u, { message: "must be host:port" }))

/**
 * How long an admission waits for others of its account by default: an admission waits only while
 * one of its account is in flight (`AccountGroups`), so this bounds the wait on a slow Redis, and
 * the call waits for its admission, so the bound is short.
 *
 * @category constants
 */
export const DEFAULT_ADMISSION_GROUP_MS = 1

/**
 * The longest `admissionGroupMs` accepted: an admission that waits longer delays its call more than
 * the round trip it saves.
 *
 * @category constants
 */
export const MAX_ADMISSION_GROUP_MS = 20

/**
 * How long a settlement waits for others of its account by default: a settlement waits only while
 * one of its account is in flight (`AccountGroups`), so this bounds the wait on a slow Redis.
 *
 * @category constants
 */
export const DEFAULT_SETTLEMENT_GROUP_MS = 2

/**
 * The longest `settlementGroupMs` accepted: a settlement that waits longer keeps its hold, and its
 * caller's balance, reserved for no gain.
 *
 * @category constants
 */
export const MAX_SETTLEMENT_GROUP_MS = 100

/**
 * The `redis` section of the config file: the seed nodes of a Redis Cluster, the same list
 * `TOLLGATE_REDIS_CLUSTER` takes; how many replicas must acknowledge a credit (top-up, grant,
 * refund) before it is answered (`TOLLGATE_REDIS_WAIT_REPLICAS`, default 0) and how long to wait
 * for them (default 1,000 ms); how long a paid call's admission may wait to go in one Redis call
 * with other admissions of its account (`admissionGroupMs`, default `DEFAULT_ADMISSION_GROUP_MS`,
 * at most `MAX_ADMISSION_GROUP_MS`), and its settlement with other settlements
 * (`settlementGroupMs`, default `DEFAULT_SETTLEMENT_GROUP_MS`, at most `MAX_SETTLEMENT_GROUP_MS`);
 * 0 sends each on its own.
 *
 * @category schemas
 */
export const RedisSection = Schema.Struct({
  cluster: Schema.optionalKey(Schema.Array(RedisSeed).check(Schema.isMinLength(1))),
  waitReplicas: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThanOrEqualTo(0))),
  waitTimeoutMs: Schema.optionalKey(Schema.Int.check(Schema.isGreaterThan(0))),
  admissionGroupMs: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_ADMISSION_GROUP_MS }))),
  settlementGroupMs: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_SETTLEMENT_GROUP_MS })))
})

const DEFAULT_WAIT_TIMEOUT_MS = 1_000

/**
 * The environment variables tollgate reads, with their rules.
 *
 * @category schemas
 */
export const Environment = Schema.Struct({
  PORT: Schema.optionalKey(Port),
  TOLLGATE_STORE: Schema.optionalKey(Schema.Literals(["memory", "redis"])),
  TOLLGATE_REDIS_URL: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^rediss?:\/\/.+/u, {
    message: "must be a redis:// or rediss:// URL"
  }))),
  TOLLGATE_REDIS_CLUSTER: Schema.optionalKey(Schema.String.check(Schema.isPattern(RedisSeeds, {
    message: "must be a comma-separated list of host:port seed nodes"
  }))),
  TOLLGATE_REDIS_WAIT_REPLICAS: Schema.optionalKey(Schema.FiniteFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(0))),
  TOLLGATE_REDIS_FUNCTIONS: Schema.optionalKey(Schema.Literals(["on", "off"])),
  TOLLGATE_WORKERS: Schema.optionalKey(Schema.Union([Schema.Literal("auto"), PositiveInt])),
  TOLLGATE_PUBLIC_ORIGIN: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^https?:\/\/[^/]+$/u, {
    message: "must be an origin such as https://api.example.com (scheme and host, no path)"
  }))),
  TOLLGATE_SERVICE_VERSION: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1))),
  TOLLGATE_SIGNING_KEY: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1))),
  TOLLGATE_PREVIOUS_SIGNING_KEYS: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1))),
  TOLLGATE_DEV_CREDENTIALS_FILE: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1))),
  TOLLGATE_MAX_BODY_BYTES: Schema.optionalKey(PositiveInt),
  TOLLGATE_LOG_LEVEL: Schema.optionalKey(Schema.Literals(["trace", "debug", "info", "warn", "error", "none"])),
  TOLLGATE_METRICS: Schema.optionalKey(Schema.Literals(["off", "open", "admin"])),
  TOLLGATE_MCP: Schema.optionalKey(Schema.Literals(["on", "off"])),
  TOLLGATE_OPERATOR_ACCOUNTS: Schema.optionalKey(Schema.String.check(Schema.isPattern(/^[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*$/u, {
    message: "must be a comma-separated list of account ids"
  }))),
  TOLLGATE_TRUSTED_PROXIES: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1))),
  TOLLGATE_UPLOAD_MEMORY_BYTES: Schema.optionalKey(PositiveInt),
  TOLLGATE_HOLD_TTL_SECONDS: Schema.optionalKey(PositiveInt),
  TOLLGATE_CONFIG: Schema.optionalKey(Schema.String.check(Schema.isMinLength(1))),
  TOLLGATE_RETENTION_DAYS: Schema.optionalKey(PositiveInt),
  TOLLGATE_MEMORY_MAX_ENTRIES: Schema.optionalKey(PositiveInt)
})

/**
 * The JSON config file. Each section is validated by the module that owns it. A key not listed
 * here is refused (`decodeStrict`): a misspelt section would otherwise be ignored and its
 * defaults served.
 *
 * @category schemas
 */
export const FileConfig = Schema.Struct({
  publicOrigin: Schema.optionalKey(Schema.String),
  models: Schema.optionalKey(Schema.Unknown),
  prices: Schema.optionalKey(Schema.Unknown),
  rpc: Schema.optionalKey(Schema.Unknown),
  rateLimits: Schema.optionalKey(Schema.Unknown),
  accounts: Schema.optionalKey(Schema.Unknown),
  x402: Schema.optionalKey(Schema.Unknown),
  chat: Schema.optionalKey(Schema.Unknown),
  webhooks: Schema.optionalKey(Schema.Unknown),
  trustedProxies: Schema.optionalKey(Schema.Array(Schema.String)),
  redis: Schema.optionalKey(RedisSection)
})

/** @category models */
export interface ServerConfig {
  readonly port: number
  readonly store: "memory" | "redis"
  readonly redisUrl: string
  /** Seed nodes (`host:port`) of a Redis Cluster: set, the Redis layers run on the cluster instead of `redisUrl`. */
  readonly redisCluster: ReadonlyArray<string> | undefined
  /**
   * Whether the paid path's scripts may run as Redis Functions (`TOLLGATE_REDIS_FUNCTIONS`, default
   * `on`); `off`, or a Redis that refuses `FUNCTION LOAD`, runs them as `EVALSHA`.
   */
  readonly redisFunctions?: boolean | undefined
  /**
   * Replicas that must have a credit (top-up, grant, refund) before it is answered, and how long to
   * wait for them (`WAIT`); absent: credits are answered once the master has them.
   */
  readonly redisReplicaAcknowledgment: { readonly replicas: number; readonly timeoutMs: number } | undefined
  /** How long a paid call's admission may wait to be grouped with others of its account; 0: never. */
  readonly admissionGroupMs: number
  /** How long a paid call's settlement may wait to be grouped with others of its account; 0: never. */
  readonly settlementGroupMs: number
  /** How many server processes share the port (`node:cluster`); more than one needs Redis. */
  readonly workers: number
  readonly publicOrigin: string
  readonly serviceVersion: string | undefined
  /** Absent: dev mode. */
  readonly signingKey: string | undefined
  /**
   * Earlier signing keys whose API keys still verify (PEMs, private or public), after a rotation:
   * `TOLLGATE_PREVIOUS_SIGNING_KEYS`.
   */
  readonly previousSigningKeys: string | undefined
  readonly devCredentialsFile: string | undefined
  readonly maxBodyBytes: number
  readonly logLevel: "trace" | "debug" | "info" | "warn" | "error" | "none"
  /** Accounts whose ADMIN keys may grant credits (`POST /billing/credits`). */
  readonly operatorAccountIds: ReadonlyArray<string>
  /** Who may scrape `GET /metrics`: nobody, anyone, or ADMIN keys. */
  readonly metrics: "off" | "open" | "admin"
  /** Whether `POST /mcp` serves the MCP tools (`TOLLGATE_MCP`, default on). */
  readonly mcp: boolean
  /** How long usage and journal entries are kept, and (memory) how many per account. */
  readonly retention: { readonly retentionMs: number; readonly maxEntries: number }
  /**
   * Proxies (CIDR ranges or addresses) whose `X-Forwarded-For`/`Forwarded` name the client:
   * `TOLLGATE_TRUSTED_PROXIES` (comma-separated) or the file's `trustedProxies`; default none.
   */
  readonly trustedProxies: ClientAddress.TrustedProxies
  /** Bytes of upload bodies held in memory at once (`UploadBudget`). */
  readonly uploadMemoryBytes: number
  /** How long a paid call's credit hold lives when nothing settles it (a crash, a store outage). */
  readonly holdTtlMs: number
  readonly file: typeof FileConfig.Type
}

/**
 * Whether the server runs in dev mode: no signing key configured.
 *
 * @category predicates
 */
export const isDevMode = (config: ServerConfig): boolean => config.signingKey === undefined

/**
 * One line naming the first bad field of an issue and the rule it broke.
 *
 * @category formatting
 */
export const describeIssue = (issue: SchemaIssue.Issue, prefix: string): string => {
  const [first] = SchemaIssue.makeFormatterStandardSchemaV1()(issue).issues
  if (first === undefined) return `${prefix}: invalid`
  const path = (first.path ?? []).map((segment) => String(typeof segment === "object" ? segment.key : segment))
  const message = first.message === "Expected no excess property" ? "unknown key" : first.message
  return `${[prefix, ...path].filter((part) => part !== "").join(".")}: ${message}`
}

/**
 * Decodes one part of the configuration, refusing keys the schema does not list, and fails with
 * one line naming the first bad field under `prefix`.
 *
 * @category decoding
 */
export const decodeStrict = <A, I>(schema: Schema.Codec<A, I>, input: unknown, prefix: string) =>
  Schema.decodeUnknownEffect(schema)(input, { onExcessProperty: "error" }).pipe(
    Effect.mapError((error) => new ConfigError({ message: describeIssue(error.issue, prefix) }))
  )

const readFile = (path: string) =>
  Effect.try({
    try: () => JSON.parse(Fs.readFileSync(path, "utf8")) as unknown,
    catch: (error) => new ConfigError({ message: `TOLLGATE_CONFIG: cannot read ${path} as JSON (${String(error)})` })
  })

/**
 * Reads and validates the configuration from an environment (default: `process.env`).
 *
 * @category constructors
 */
export const load = (env: Readonly<Record<string, string | undefined>> = process.env) =>
  Effect.gen(function*() {
    const known = Object.fromEntries(
      Object.keys(Environment.fields).flatMap((name) => env[name] === undefined ? [] : [[name, env[name]]])
    )
    const vars = yield* decodeStrict(Environment, known, "")
    const file = vars.TOLLGATE_CONFIG === undefined
      ? {}
      : yield* decodeStrict(FileConfig, yield* readFile(vars.TOLLGATE_CONFIG), "TOLLGATE_CONFIG")
    const port = vars.PORT ?? 8787
    const store = vars.TOLLGATE_STORE ?? "memory"
    const redisCluster = vars.TOLLGATE_REDIS_CLUSTER?.split(",") ?? file.redis?.cluster
    if (redisCluster !== undefined && vars.TOLLGATE_REDIS_URL !== undefined) {
      return yield* new ConfigError({ message: "TOLLGATE_REDIS_CLUSTER: set either it or TOLLGATE_REDIS_URL, not both" })
    }
    if (redisCluster !== undefined && typeof file.rateLimits === "object" && file.rateLimits !== null && "global" in file.rateLimits) {
      return yield* new ConfigError({
        message:
          "TOLLGATE_CONFIG.rateLimits.global: a global limit is one key every account's script touches, which a Redis Cluster cannot put in each account's slot"
      })
    }
    if (store === "redis" && vars.TOLLGATE_REDIS_URL === undefined && redisCluster === undefined) {
      return yield* new ConfigError({ message: "TOLLGATE_REDIS_URL: required when TOLLGATE_STORE is redis (or TOLLGATE_REDIS_CLUSTER)" })
    }
    const waitReplicas = vars.TOLLGATE_REDIS_WAIT_REPLICAS ?? file.redis?.waitReplicas ?? 0
    if (waitReplicas > 0 && store !== "redis") {
      return yield* new ConfigError({ message: "TOLLGATE_REDIS_WAIT_REPLICAS: replicas are waited for only with TOLLGATE_STORE=redis" })
    }
    const production = vars.TOLLGATE_SIGNING_KEY !== undefined
    if (vars.TOLLGATE_PREVIOUS_SIGNING_KEYS !== undefined && !production) {
      return yield* new ConfigError({
        message: "TOLLGATE_PREVIOUS_SIGNING_KEYS: needs TOLLGATE_SIGNING_KEY (the key new API keys are signed with)"
      })
    }
    const workers = vars.TOLLGATE_WORKERS === "auto" || (vars.TOLLGATE_WORKERS === undefined && store === "redis" && production)
      ? Os.availableParallelism()
      : vars.TOLLGATE_WORKERS ?? 1
    if (workers > 1 && !production) {
      return yield* new ConfigError({
        message: `TOLLGATE_WORKERS: ${workers} workers need TOLLGATE_SIGNING_KEY (dev mode's throwaway signing key is per process)`
      })
    }
    if (workers > 1 && store === "memory") {
      return yield* new ConfigError({
        message: `TOLLGATE_WORKERS: ${workers} workers need TOLLGATE_STORE=redis (memory stores are not shared between processes)`
      })
    }
    const proxies = vars.TOLLGATE_TRUSTED_PROXIES !== undefined
      ? { name: "TOLLGATE_TRUSTED_PROXIES", entries: vars.TOLLGATE_TRUSTED_PROXIES.split(",") }
      : { name: "TOLLGATE_CONFIG.trustedProxies", entries: file.trustedProxies ?? [] }
    const trustedProxies = ClientAddress.parseTrustedProxies(proxies.entries)
    if ("invalid" in trustedProxies) {
      return yield* new ConfigError({ message: `${proxies.name}: "${trustedProxies.invalid}" is not an IP address or CIDR range` })
    }
    const config: ServerConfig = {
      port,
      store,
      redisUrl: vars.TOLLGATE_REDIS_URL ?? "redis://127.0.0.1:6379",
      redisCluster,
      redisFunctions: vars.TOLLGATE_REDIS_FUNCTIONS !== "off",
      redisReplicaAcknowledgment: waitReplicas === 0
        ? undefined
        : { replicas: waitReplicas, timeoutMs: file.redis?.waitTimeoutMs ?? DEFAULT_WAIT_TIMEOUT_MS },
      admissionGroupMs: file.redis?.admissionGroupMs ?? DEFAULT_ADMISSION_GROUP_MS,
      settlementGroupMs: file.redis?.settlementGroupMs ?? DEFAULT_SETTLEMENT_GROUP_MS,
      workers,
      publicOrigin: vars.TOLLGATE_PUBLIC_ORIGIN ?? file.publicOrigin ?? `http://localhost:${port}`,
      serviceVersion: vars.TOLLGATE_SERVICE_VERSION,
      signingKey: vars.TOLLGATE_SIGNING_KEY,
      previousSigningKeys: vars.TOLLGATE_PREVIOUS_SIGNING_KEYS,
      devCredentialsFile: vars.TOLLGATE_DEV_CREDENTIALS_FILE,
      maxBodyBytes: vars.TOLLGATE_MAX_BODY_BYTES ?? 1_048_576,
      logLevel: vars.TOLLGATE_LOG_LEVEL ?? "info",
      metrics: vars.TOLLGATE_METRICS ?? "off",
      mcp: vars.TOLLGATE_MCP !== "off",
      operatorAccountIds: vars.TOLLGATE_OPERATOR_ACCOUNTS?.split(",") ?? [],
      retention: {
        retentionMs: vars.TOLLGATE_RETENTION_DAYS === undefined
          ? CreditLedger.DEFAULT_RETENTION_MS
          : vars.TOLLGATE_RETENTION_DAYS * CreditLedger.DAY_MS,
        maxEntries: vars.TOLLGATE_MEMORY_MAX_ENTRIES ?? CreditLedger.DEFAULT_MAX_ENTRIES
      },
      trustedProxies,
      uploadMemoryBytes: vars.TOLLGATE_UPLOAD_MEMORY_BYTES ?? UploadBudget.DEFAULT_MAX_BYTES,
      holdTtlMs: vars.TOLLGATE_HOLD_TTL_SECONDS === undefined ? CreditLedger.DEFAULT_HOLD_TTL_MS : vars.TOLLGATE_HOLD_TTL_SECONDS * 1000,
      file
    }
    return config
  })
