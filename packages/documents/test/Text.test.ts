import { describe, expect, it } from "@effect/vitest"
import * as Sniff from "../src/Sniff.ts"
import * as Text from "../src/Text.ts"

const bytes = (...parts: Array<ReadonlyArray<number> | string>) =>
  new Uint8Array(parts.flatMap((part) => typeof part === "string" ? [...Buffer.from(part, "latin1")] : [...part]))

describe("Plain text: a BOM decides, then strict UTF-8, then the legacy encoding with the fewest replacement characters", () => {
  it("UTF-8, UTF-16LE and UTF-16BE byte-order marks are honoured and stripped", () => {
    expect(Text.decode(new Uint8Array([0xef, 0xbb, 0xbf, ...Buffer.from("héllo", "utf8")]))).toBe("héllo")
    expect(Text.decode(new Uint8Array([0xff, 0xfe, ...Buffer.from("héllo", "utf16le")]))).toBe("héllo")
    expect(Text.decode(new Uint8Array([0xfe, 0xff, ...Buffer.from("héllo", "utf16le").swap16()]))).toBe("héllo")
  })

  it("valid UTF-8 is decoded as UTF-8", () => {
    expect(Text.decode(new Uint8Array(Buffer.from("ゾルゲと尾崎 𐌲𐌿𐍄𐌹𐍃𐌺 naïve", "utf8")))).toBe("ゾルゲと尾崎 𐌲𐌿𐍄𐌹𐍃𐌺 naïve")
  })

  it("Windows-1252 French is recognised", () => {
    expect(Text.decode(bytes("Le caf", [0xe9], " est tr", [0xe8], "s bon, d", [0xe9], "j", [0xe0], " vu."))).toBe(
      "Le café est très bon, déjà vu."
    )
  })

  it("Shift_JIS Japanese is recognised", () => {
    const sjis = [0x93, 0xfa, 0x96, 0x7b, 0x8c, 0xea, 0x82, 0xcc, 0x83, 0x65, 0x83, 0x4c, 0x83, 0x58, 0x83, 0x67, 0x82, 0xc5, 0x82, 0xb7]
    expect(Text.decode(new Uint8Array(sjis))).toBe("日本語のテキストです")
  })

  it("Windows-1251 Russian is recognised", () => {
    const text = "Привет, как дела? Это проверка кодировки."
    const table = new TextDecoder("windows-1251")
    const encode = new Map<string, number>()
    for (let b = 0; b < 256; b++) encode.set(table.decode(new Uint8Array([b])), b)
    expect(Text.decode(new Uint8Array([...text].map((c) => encode.get(c)!)))).toBe(text)
  })

  it("CRLF and lone CR line endings become LF", () => {
    expect(Text.decode(bytes("one\r\ntwo\rthree\n"))).toBe("one\ntwo\nthree\n")
  })
})

describe("The format is sniffed from the bytes, never from a name or content type", () => {
  it("PDF, zip, text and binary are told apart by their content", () => {
    expect(Sniff.sniff(bytes("%PDF-1.7\n"))).toBe("pdf")
    expect(Sniff.sniff(bytes("garbage before %PDF-1.4\n"))).toBe("pdf")
    expect(Sniff.sniff(bytes([0x50, 0x4b, 0x03, 0x04, 0, 0]))).toBe("zip")
    expect(Sniff.sniff(bytes("just some words\n"))).toBe("text")
    expect(Sniff.sniff(bytes([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]))).toBe("binary")
    expect(Sniff.sniff(bytes([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1, 0, 0]))).toBe("binary")
  })
})
