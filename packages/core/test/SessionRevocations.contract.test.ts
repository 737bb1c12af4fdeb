import * as SessionRevocationsContract from "@tollgate/testkit/contracts/SessionRevocations"
import * as SessionRevocations from "../src/SessionRevocations.ts"

SessionRevocationsContract.run([{ name: "memory", layer: SessionRevocations.layerMemory }])
