import * as AuditLogContract from "@tollgate/testkit/contracts/AuditLog"
import * as AuditLog from "../src/AuditLog.ts"

AuditLogContract.run([{ name: "memory", layer: AuditLog.layerMemory }])
