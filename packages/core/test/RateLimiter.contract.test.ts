import * as RateLimiterContract from "@tollgate/testkit/contracts/RateLimiter"
import { Layer } from "effect"
import * as RateLimiter from "../src/RateLimiter.ts"
import * as RateLimitLog from "../src/RateLimitLog.ts"

RateLimiterContract.run([{ name: "memory", layer: RateLimiter.layerMemory().pipe(Layer.provideMerge(RateLimitLog.layerMemory())) }])
