import * as WebhooksContract from "@tollgate/testkit/contracts/Webhooks"
import * as Webhooks from "../src/Webhooks.ts"

WebhooksContract.run([{ name: "memory", layer: WebhooksContract.observed(Webhooks.layerStoreMemory) }])
