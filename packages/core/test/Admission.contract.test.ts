import * as AdmissionContract from "@tollgate/testkit/contracts/Admission"

AdmissionContract.run([{ name: "memory", layer: AdmissionContract.memory }])
