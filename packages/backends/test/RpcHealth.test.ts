import * as RpcHealth from "@tollgate/backends/RpcHealth"
import { describe, expect, it } from "vitest"

const node = (url: string, head?: number) => {
  const upstream = RpcHealth.make(url)
  upstream.head = head
  upstream.headHash = head === undefined ? undefined : `0x${head}`
  return upstream
}

describe("RpcHealth: upstreams are tried by score, a lagging one skipped for reads while a fresh one exists", () => {
  it("a node failing its calls ranks below a slower one that answers", () => {
    const failing = node("http://a/")
    const slower = node("http://b/")
    for (let i = 0; i < 10; i++) {
      RpcHealth.record(failing, 5, true)
      RpcHealth.record(slower, 40, false)
    }
    expect(RpcHealth.order([failing, slower], true, 5).map((each) => each.url)).toEqual(["http://b/", "http://a/"])
  })

  it("the faster of two healthy nodes comes first; equal scores keep the configured order", () => {
    const slow = node("http://slow/")
    const fast = node("http://fast/")
    expect(RpcHealth.order([slow, fast], true, 5).map((each) => each.url)).toEqual(["http://slow/", "http://fast/"])
    RpcHealth.record(slow, 50, false)
    RpcHealth.record(fast, 5, false)
    expect(RpcHealth.order([slow, fast], true, 5).map((each) => each.url)).toEqual(["http://fast/", "http://slow/"])
  })

  it("a read skips a node more than maxLagBlocks behind; a write does not; all lagging: all used", () => {
    const behind = node("http://behind/", 90)
    const best = node("http://best/", 100)
    expect(RpcHealth.order([behind, best], true, 5).map((each) => each.url)).toEqual(["http://best/"])
    expect(RpcHealth.order([behind, best], false, 5)).toHaveLength(2)
    expect(RpcHealth.order([behind, best], true, 10)).toHaveLength(2)
  })

  it("a node on another chain is never used", () => {
    const wrong = node("http://wrong/", 100)
    wrong.chainConfirmed = false
    expect(RpcHealth.order([wrong, node("http://right/")], false, 5).map((each) => each.url)).toEqual(["http://right/"])
  })

  it("p90 needs 16 samples; the chain state is the best head and the highest finalized block", () => {
    const upstream = node("http://a/", 10)
    for (let i = 1; i <= 15; i++) RpcHealth.record(upstream, i, false)
    expect(RpcHealth.p90(upstream)).toBeUndefined()
    for (let i = 16; i <= 20; i++) RpcHealth.record(upstream, i, false)
    expect(RpcHealth.p90(upstream)).toBe(19)
    upstream.finalized = 4
    const other = node("http://b/", 12)
    other.finalized = 3
    expect(RpcHealth.chainState([upstream, other])).toEqual({ head: 12, headHash: "0x12", finalized: 4 })
  })

  it("a URL's label drops its credentials", () => {
    expect(RpcHealth.label("https://user:secret@node.example/rpc?key=k")).toBe("https://node.example/rpc?key=k")
  })
})
