import * as GenerationsContract from "@tollgate/testkit/contracts/Generations"
import * as Generations from "../src/Generations.ts"

GenerationsContract.run([{ name: "memory", layer: Generations.layerMemory }])
