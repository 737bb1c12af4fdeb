import * as IdempotencyStoreContract from "@tollgate/testkit/contracts/IdempotencyStore"
import { Layer } from "effect"
import * as IdempotencyStore from "../src/IdempotencyStore.ts"

const Store = IdempotencyStore.IdempotencyStore
const LEASE_MS = IdempotencyStoreContract.LEASE_MS

IdempotencyStoreContract.run([{ name: "memory", layer: IdempotencyStore.layerMemory }])

IdempotencyStoreContract.runLease([{ name: "memory", layer: Layer.effect(Store, IdempotencyStore.makeMemory({ leaseMs: LEASE_MS })) }])
