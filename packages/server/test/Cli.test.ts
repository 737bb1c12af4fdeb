import { NodeServices } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Auth, AuthStore, CreditLedger, Jwt } from "@tollgate/core"
import { Effect, Layer, Option } from "effect"
import { TestConsole } from "effect/testing"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Cli from "../src/Cli.ts"
import * as DevCredentials from "../src/DevCredentials.ts"

const signingKey = await Effect.runPromise(Jwt.generateSigningKey)
const services = Layer.mergeAll(
  Auth.layer({ signingKey, publicOrigin: "http://localhost:8787" }).pipe(Layer.provide(AuthStore.layerMemory)),
  CreditLedger.layerMemory,
  NodeServices.layer
)

const lastJson = Effect.map(TestConsole.logLines, (lines) => JSON.parse(String(lines.at(-1))) as Record<string, string>)

describe("Operator CLI: create an account, mint and revoke keys with the signing key, grant credits", () => {
  it.effect("the commands act on the store, and a minted key authenticates until revoked", () =>
    Effect.gen(function*() {
      const auth = yield* Auth.Auth
      yield* Cli.run(["accounts", "create", "--id", "acct_cli", "--description", "Acme"])
      assert.isTrue(Option.isSome(yield* auth.getAccount("acct_cli")))

      yield* Cli.run(["keys", "mint", "--account", "acct_cli", "--type", "ADMIN", "--description", "ops"])
      const minted = yield* lastJson
      const principal = yield* auth.authenticate({ authorization: `Bearer ${minted["apiKey"]}` })
      assert.strictEqual(Option.getOrUndefined(principal)?.accountId, "acct_cli")

      yield* Cli.run(["keys", "revoke", "--account", "acct_cli", "--id", minted["keyId"]!])
      const refused = yield* Effect.flip(auth.authenticate({ authorization: `Bearer ${minted["apiKey"]}` }))
      assert.strictEqual(refused._tag, "Unauthenticated")

      yield* Cli.run(["credits", "grant", "--account", "acct_cli", "--usd", "25.00", "--reference", "invoice-42"])
      assert.strictEqual(Number((yield* lastJson)["balanceUsd"]), 25)
    }).pipe(Effect.provide(services)))
})

describe("Dev mode: a demo account with one ADMIN and one INFERENCE key, written to the credentials file", () => {
  it.effect("the keys authenticate with their types and the file holds exactly the three fields", () =>
    Effect.gen(function*() {
      const auth = yield* Auth.Auth
      const dir = yield* Effect.promise(() => Fs.mkdtemp(Path.join(Os.tmpdir(), "tollgate-dev-")))
      const file = Path.join(dir, "credentials.json")
      const credentials = yield* DevCredentials.create({ file })
      const written = JSON.parse(yield* Effect.promise(() => Fs.readFile(file, "utf8")))
      assert.deepStrictEqual(written, credentials)
      assert.deepStrictEqual(Object.keys(written), ["accountId", "adminKey", "inferenceKey"])
      const admin = yield* auth.authenticate({ authorization: `Bearer ${credentials.adminKey}` })
      const inference = yield* auth.authenticate({ authorization: `Bearer ${credentials.inferenceKey}` })
      const typeOf = (principal: typeof admin) =>
        Option.match(principal, { onNone: () => undefined, onSome: (p) => p._tag === "ApiKey" ? p.keyType : undefined })
      assert.strictEqual(typeOf(admin), "ADMIN")
      assert.strictEqual(typeOf(inference), "INFERENCE")
      yield* Effect.promise(() => Fs.rm(dir, { recursive: true }))
    }).pipe(Effect.provide(services)))
})
