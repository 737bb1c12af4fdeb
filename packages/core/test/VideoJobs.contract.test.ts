import * as VideoJobsContract from "@tollgate/testkit/contracts/VideoJobs"
import * as VideoJobs from "../src/VideoJobs.ts"

VideoJobsContract.run([{ name: "memory", layer: VideoJobs.layerMemory }])
