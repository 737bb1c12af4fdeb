import * as WebhookStoreContract from "@tollgate/testkit/contracts/WebhookStore"
import * as Webhooks from "../src/Webhooks.ts"

WebhookStoreContract.run([{ name: "memory", layer: Webhooks.layerStoreMemory }])
