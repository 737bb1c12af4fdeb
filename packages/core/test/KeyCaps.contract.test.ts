import * as KeyCapsContract from "@tollgate/testkit/contracts/KeyCaps"

KeyCapsContract.run([{ name: "memory", layer: KeyCapsContract.memory }])
