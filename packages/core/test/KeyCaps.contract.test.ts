import * as AdmissionContract from "@tollgate/testkit/contracts/Admission"
import * as KeyCapsContract from "@tollgate/testkit/contracts/KeyCaps"

KeyCapsContract.run([{ name: "memory", layer: AdmissionContract.memory }])
