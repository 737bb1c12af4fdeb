/**
 * WAV (RIFF, PCM) written and read by hand: the dev speech model answers a short generated tone
 * as WAV or raw PCM, the dev transcription model and the transcription route read a WAV's
 * duration from its header. Only the fields these need are read; a file that is not a PCM WAV is
 * `undefined`, never an exception.
 *
 * @since 0.1.0
 */

/** @category models */
export interface Format {
  readonly sampleRate: number
  readonly channels: number
  readonly bitsPerSample: number
}

/**
 * What the OpenAI speech API answers for `pcm`: 24 kHz, 16-bit signed little-endian, mono.
 *
 * @category constants
 */
export const speechFormat: Format = { sampleRate: 24_000, channels: 1, bitsPerSample: 16 }

/**
 * A tone of `seconds` whose pitch follows `seed`, as 16-bit PCM samples (no header).
 *
 * @category constructors
 */
export const tone = (seconds: number, seed: number, format: Format = speechFormat): Uint8Array => {
  const samples = Math.max(1, Math.round(seconds * format.sampleRate))
  const bytes = new Uint8Array(samples * 2)
  const view = new DataView(bytes.buffer)
  const hz = 220 + (seed % 440)
  for (let i = 0; i < samples; i++) {
    const fade = Math.min(1, i / 240, (samples - i) / 240)
    view.setInt16(i * 2, Math.round(Math.sin((2 * Math.PI * hz * i) / format.sampleRate) * 8000 * fade), true)
  }
  return bytes
}

/**
 * PCM samples with a 44-byte WAV header.
 *
 * @category constructors
 */
export const encode = (pcm: Uint8Array, format: Format = speechFormat): Uint8Array => {
  const bytes = new Uint8Array(44 + pcm.length)
  const view = new DataView(bytes.buffer)
  const ascii = (offset: number, text: string) => {
    for (let i = 0; i < text.length; i++) bytes[offset + i] = text.charCodeAt(i)
  }
  const blockAlign = format.channels * format.bitsPerSample / 8
  ascii(0, "RIFF")
  view.setUint32(4, 36 + pcm.length, true)
  ascii(8, "WAVE")
  ascii(12, "fmt ")
  view.setUint32(16, 16, true)
  view.setUint16(20, 1, true)
  view.setUint16(22, format.channels, true)
  view.setUint32(24, format.sampleRate, true)
  view.setUint32(28, format.sampleRate * blockAlign, true)
  view.setUint16(32, blockAlign, true)
  view.setUint16(34, format.bitsPerSample, true)
  ascii(36, "data")
  view.setUint32(40, pcm.length, true)
  bytes.set(pcm, 44)
  return bytes
}

const tag = (bytes: Uint8Array, offset: number) => String.fromCharCode(...bytes.subarray(offset, offset + 4))

/**
 * The duration in seconds of a PCM WAV, from its `fmt ` and `data` chunks; `undefined` for
 * anything else. A `data` size larger than the file (a stream's placeholder) counts the bytes there are.
 *
 * @category decoding
 */
export const duration = (bytes: Uint8Array): number | undefined => {
  if (bytes.length < 12 || tag(bytes, 0) !== "RIFF" || tag(bytes, 8) !== "WAVE") return undefined
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  let byteRate: number | undefined
  let offset = 12
  while (offset + 8 <= bytes.length) {
    const id = tag(bytes, offset)
    const size = view.getUint32(offset + 4, true)
    if (id === "fmt " && offset + 20 <= bytes.length) {
      byteRate = view.getUint32(offset + 16, true)
    } else if (id === "data") {
      if (byteRate === undefined || byteRate === 0) return undefined
      return Math.min(size, bytes.length - offset - 8) / byteRate
    }
    offset += 8 + size + (size % 2)
  }
  return undefined
}
