import * as PendingSettlementsContract from "@tollgate/testkit/contracts/PendingSettlements"
import * as PendingSettlements from "../src/PendingSettlements.ts"

PendingSettlementsContract.run([{ name: "memory", layer: PendingSettlements.layerMemory }])
