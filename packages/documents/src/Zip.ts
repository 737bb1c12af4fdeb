/**
 * A small, defensive zip reader for OOXML packages: it refuses what it does not handle (zip64,
 * encryption, compression other than stored and deflate, more entries than a real document has)
 * before inflating anything, and no part inflates past a budget sized from the input.
 *
 * **Details**
 *
 * Hand-written because it must parse the central directory itself to refuse before inflating, and
 * because the sizes an archive declares are exactly what a zip bomb lies about: each part is
 * inflated with a hard output budget, never trusting the declared size.
 *
 * @since 0.1.0
 */
import * as Zlib from "node:zlib"
import { refuse } from "./DocumentError.ts"

/** @category models */
export interface Limits {
  /** More entries than this is refused before any inflating (a 1,500-slide deck has about 6k). */
  readonly maxEntries: number
  /** Inflated bytes allowed per input byte, over all parts read. */
  readonly expansionRatio: number
  /** Inflated bytes always allowed, however small the input (tiny documents compress well). */
  readonly minBudgetBytes: number
  /** Absolute cap on inflated bytes over all parts. */
  readonly maxBudgetBytes: number
  /** Absolute cap on the inflated size of one part. */
  readonly maxPartBytes: number
}

/** @category defaults */
export const defaultLimits: Limits = {
  maxEntries: 10_000,
  expansionRatio: 40,
  minBudgetBytes: 16 * 1024 * 1024,
  maxBudgetBytes: 512 * 1024 * 1024,
  maxPartBytes: 256 * 1024 * 1024
}

/** @category models */
export interface Entry {
  readonly name: string
  readonly method: 0 | 8
  readonly compressedSize: number
  readonly localOffset: number
}

/** @category models */
export interface Archive {
  readonly bytes: Uint8Array
  readonly entries: ReadonlyMap<string, Entry>
  readonly limits: Limits
  /** Inflated bytes still allowed for this archive. */
  remaining: number
}

const EOCD = 0x06054b50
const ZIP64_LOCATOR = 0x07064b50
const CENTRAL = 0x02014b50
const LOCAL = 0x04034b50

const utf8 = new TextDecoder("utf-8")
const latin1 = new TextDecoder("latin1")

/**
 * Whether the bytes start like a zip archive.
 *
 * @category guards
 */
export const isZip = (bytes: Uint8Array): boolean =>
  bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 0x03 && bytes[3] === 0x04

const findEndOfCentralDirectory = (view: DataView): number => {
  const last = view.byteLength - 22
  const first = Math.max(0, last - 0xffff)
  for (let p = last; p >= first; p--) {
    if (view.getUint32(p, true) === EOCD) return p
  }
  throw refuse("malformed", "The file is not a readable zip archive")
}

/**
 * Reads the central directory. Throws `DocumentRefused` on anything outside the supported subset.
 *
 * @category constructors
 */
export const open = (bytes: Uint8Array, limits: Limits = defaultLimits): Archive => {
  if (bytes.length < 22) throw refuse("malformed", "The file is not a readable zip archive")
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const eocd = findEndOfCentralDirectory(view)
  const count = view.getUint16(eocd + 10, true)
  const size = view.getUint32(eocd + 12, true)
  const offset = view.getUint32(eocd + 16, true)
  if (
    count === 0xffff || size === 0xffffffff || offset === 0xffffffff ||
    (eocd >= 20 && view.getUint32(eocd - 20, true) === ZIP64_LOCATOR)
  ) {
    throw refuse("zip64", "Zip64 archives are not supported")
  }
  if (view.getUint16(eocd + 4, true) !== 0 || view.getUint16(eocd + 6, true) !== 0) {
    throw refuse("malformed", "Multi-disk zip archives are not supported")
  }
  if (count > limits.maxEntries) {
    throw refuse("zip-entries", `The archive has more than ${limits.maxEntries} entries`)
  }
  if (offset + size > eocd) throw refuse("malformed", "The zip central directory is out of bounds")
  const entries = new Map<string, Entry>()
  // The directory is walked to its declared end, not for the declared count: a count field
  // wrapped at 65,536 must not hide the real number of entries.
  const end = offset + size
  let p = offset
  for (let parsed = 1; p < end; parsed++) {
    if (parsed > limits.maxEntries) throw refuse("zip-entries", `The archive has more than ${limits.maxEntries} entries`)
    if (p + 46 > end || view.getUint32(p, true) !== CENTRAL) {
      throw refuse("malformed", "The zip central directory is corrupt")
    }
    const flags = view.getUint16(p + 8, true)
    const method = view.getUint16(p + 10, true)
    const compressedSize = view.getUint32(p + 20, true)
    const declaredSize = view.getUint32(p + 24, true)
    const nameLength = view.getUint16(p + 28, true)
    const extraLength = view.getUint16(p + 30, true)
    const commentLength = view.getUint16(p + 32, true)
    const localOffset = view.getUint32(p + 42, true)
    if ((flags & 0x1) !== 0 || (flags & 0x40) !== 0) throw refuse("encrypted", "Encrypted documents are not supported")
    if (method !== 0 && method !== 8) throw refuse("zip-compression", `Zip compression method ${method} is not supported`)
    if (compressedSize === 0xffffffff || declaredSize === 0xffffffff || localOffset === 0xffffffff) {
      throw refuse("zip64", "Zip64 archives are not supported")
    }
    const nameBytes = bytes.subarray(p + 46, p + 46 + nameLength)
    const name = ((flags & 0x800) !== 0 ? utf8 : latin1).decode(nameBytes)
    if (!entries.has(name)) entries.set(name, { name, method, compressedSize, localOffset })
    p += 46 + nameLength + extraLength + commentLength
  }
  const budget = Math.min(limits.maxBudgetBytes, Math.max(limits.minBudgetBytes, bytes.length * limits.expansionRatio))
  return { bytes, entries, limits, remaining: budget }
}

const isBudgetError = (error: unknown): boolean =>
  error instanceof RangeError || (error as { code?: unknown } | null)?.code === "ERR_BUFFER_TOO_LARGE"

/**
 * The inflated bytes of one part, or `undefined` when the archive has no such entry. The output is
 * bounded by what is left of the archive's budget, never by the size the entry declares.
 *
 * @category reading
 */
export const read = (archive: Archive, name: string): Uint8Array | undefined => {
  const entry = archive.entries.get(name)
  if (entry === undefined) return undefined
  const { bytes } = archive
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const local = entry.localOffset
  if (local + 30 > bytes.length || view.getUint32(local, true) !== LOCAL) {
    throw refuse("malformed", "A zip entry is corrupt")
  }
  const start = local + 30 + view.getUint16(local + 26, true) + view.getUint16(local + 28, true)
  const end = start + entry.compressedSize
  if (end > bytes.length) throw refuse("malformed", "A zip entry is truncated")
  const data = bytes.subarray(start, end)
  const limit = Math.min(archive.remaining, archive.limits.maxPartBytes)
  let output: Uint8Array
  if (entry.method === 0) {
    if (data.length > limit) throw refuse("inflate-budget", "The document expands beyond the allowed size")
    output = data
  } else {
    try {
      output = Zlib.inflateRawSync(data, { maxOutputLength: Math.max(1, limit) })
    } catch (error) {
      if (isBudgetError(error)) throw refuse("inflate-budget", "The document expands beyond the allowed size")
      throw refuse("malformed", "A zip entry could not be inflated")
    }
  }
  archive.remaining -= output.length
  return output
}
