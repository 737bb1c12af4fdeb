import * as CreditLedgerContract from "@tollgate/testkit/contracts/CreditLedger"
import * as CreditLedger from "../src/CreditLedger.ts"

CreditLedgerContract.run([{ name: "memory", layer: CreditLedger.layerMemory }])
