import * as AbuseGuardContract from "@tollgate/testkit/contracts/AbuseGuard"
import * as AuthContract from "@tollgate/testkit/contracts/Auth"
import * as AbuseGuard from "../src/AbuseGuard.ts"
import * as AuthStore from "../src/AuthStore.ts"

AuthContract.run([{ name: "memory", layer: AuthContract.authLayer(AuthStore.layerMemory) }])

AbuseGuardContract.run([{ name: "memory", layer: AbuseGuard.layerMemory }])
