/**
 * The portal page's script: sign in with a browser wallet (an injected EIP-1193 provider, or a
 * Solana wallet announced through the Wallet Standard) or an ADMIN key, then show the balance,
 * top up through x402 (the page signs the EIP-3009 authorization of the 402's `accepts` entry),
 * make and revoke keys, set or remove each key's spend cap and restrictions, and draw the spend of
 * the last 30 days.
 *
 * Served as is, with no build step and nothing from another host. Every string that came from a
 * user, a wallet or the server goes into the page through `textContent` or an attribute, never as
 * markup. Requests use paths relative to the page, so the portal works wherever tollgate is
 * mounted.
 */

const $ = (id) => document.getElementById(id)

const status = $("status")
let csrfToken
let signedIn

/** Shows a message to screen readers and eyes; `kind` is "ok", "error" or nothing. */
const say = (text, kind) => {
  status.textContent = text
  status.className = kind === undefined ? "status" : `status ${kind}`
}

class PortalError extends Error {
  constructor(message, statusCode) {
    super(message)
    this.statusCode = statusCode
  }
}

const api = async (method, path, body) => {
  const headers = {}
  if (body !== undefined) headers["content-type"] = "application/json"
  if (method !== "GET" && csrfToken !== undefined) headers["x-csrf-token"] = csrfToken
  const response = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  if (response.status === 204) return undefined
  const data = await response.json().catch(() => ({}))
  if (!response.ok) throw new PortalError(typeof data.error === "string" ? data.error : `HTTP ${response.status}`, response.status)
  return data
}

/** An element with text and attributes; children are elements or strings (as text). */
const element = (tag, attributes = {}, ...children) => {
  const node = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value)
  for (const child of children) node.append(child)
  return node
}

const SVG = "http://www.w3.org/2000/svg"
const svgElement = (tag, attributes = {}) => {
  const node = document.createElementNS(SVG, tag)
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value))
  return node
}

/** A decimal USD string of the server's, exactly, with at least cents: "4.99" -> "$4.99", "0.000123" -> "$0.000123". */
const usd = (text) => {
  const negative = text.startsWith("-")
  const [whole, fraction = ""] = (negative ? text.slice(1) : text).split(".")
  return `${negative ? "-" : ""}$${Number(whole).toLocaleString("en-US")}.${fraction.padEnd(2, "0")}`
}

/** A number of USD from a usage entry, exactly to the nano (never in exponent notation). */
const usdOfNumber = (value) => usd(value.toFixed(9).replace(/\.?0+$/, ""))

/** A computed amount, rounded for a chart label: under a dollar to 3 digits, so that cents of a cent are not rounded away. */
const usdRounded = (value) =>
  value.toLocaleString("en-US", {
    style: "currency",
    currency: "USD",
    ...(value > 0 && value < 1
      ? { minimumSignificantDigits: 2, maximumSignificantDigits: 3 }
      : { minimumFractionDigits: 2, maximumFractionDigits: 2 })
  })

const when = (iso) => `${iso.slice(0, 10)} ${iso.slice(11, 16)}`

const utf8Hex = (text) => `0x${Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, "0")).join("")}`

const base64 = (bytes) => btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""))

const randomHex32 = () => `0x${Array.from(crypto.getRandomValues(new Uint8Array(32)), (b) => b.toString(16).padStart(2, "0")).join("")}`

/** What went wrong, in words: wallets reject with plain `{code, message}` objects, not Errors. */
const describeError = (error) => typeof error?.message === "string" ? error.message : String(error)

const busy = async (button, run) => {
  button.disabled = true
  try {
    await run()
  } catch (error) {
    say(describeError(error), "error")
    if (error instanceof PortalError && error.statusCode === 401 && signedIn !== undefined) showSignIn()
  } finally {
    button.disabled = false
  }
}

// ---- wallets --------------------------------------------------------------------------------

const ethereum = () => window.ethereum

/** Solana wallets announced through the Wallet Standard that can connect and sign a message. */
const solanaWallets = []
const registerWallet = (wallet) => {
  const features = wallet.features ?? {}
  if (features["standard:connect"] !== undefined && features["solana:signMessage"] !== undefined) {
    solanaWallets.push(wallet)
    $("signin-solana").hidden = false
    $("no-wallet").hidden = true
  }
  return () => {}
}
window.addEventListener("wallet-standard:register-wallet", (event) => event.detail({ register: registerWallet }))
window.dispatchEvent(new CustomEvent("wallet-standard:app-ready", { detail: { register: registerWallet } }))

const BASE_CHAIN_ID = 8453

/** Asks the wallet to be on the chain of the typed data it is about to sign (wallets refuse otherwise). */
const ensureChain = async (provider, chainId) => {
  const current = Number.parseInt(await provider.request({ method: "eth_chainId" }), 16)
  if (current === chainId) return
  const hex = `0x${chainId.toString(16)}`
  try {
    await provider.request({ method: "wallet_switchEthereumChain", params: [{ chainId: hex }] })
  } catch (error) {
    if (error?.code !== 4902 || chainId !== BASE_CHAIN_ID) throw error
    await provider.request({
      method: "wallet_addEthereumChain",
      params: [{
        chainId: hex,
        chainName: "Base",
        nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
        rpcUrls: ["https://mainnet.base.org"],
        blockExplorerUrls: ["https://basescan.org"]
      }]
    })
  }
}

const signInWithEvm = async () => {
  const provider = ethereum()
  if (provider === undefined) throw new Error("No Ethereum wallet in this browser")
  const [address] = await provider.request({ method: "eth_requestAccounts" })
  const challenge = await api("GET", `api/v1/portal/challenge?family=evm&address=${encodeURIComponent(address)}`)
  say("Sign the message in your wallet…")
  const signature = await provider.request({ method: "personal_sign", params: [utf8Hex(challenge.message), address] })
  return api("POST", "api/v1/portal/session", { wallet: { address, message: challenge.message, signature, chainId: challenge.chainId } })
}

const signInWithSolana = async () => {
  const wallet = solanaWallets[0]
  if (wallet === undefined) throw new Error("No Solana wallet in this browser")
  const { accounts } = await wallet.features["standard:connect"].connect()
  const account = accounts[0]
  if (account === undefined) throw new Error("The wallet shared no account")
  const challenge = await api("GET", `api/v1/portal/challenge?family=solana&address=${encodeURIComponent(account.address)}`)
  say("Sign the message in your wallet…")
  const [signed] = await wallet.features["solana:signMessage"].signMessage({ account, message: new TextEncoder().encode(challenge.message) })
  return api("POST", "api/v1/portal/session", {
    wallet: { address: account.address, message: challenge.message, signature: base64(signed.signature), chainId: challenge.chainId }
  })
}

// ---- the signed-in page ---------------------------------------------------------------------

const showSignIn = () => {
  signedIn = undefined
  csrfToken = undefined
  $("dashboard").hidden = true
  $("signin").hidden = false
  $("no-wallet").hidden = ethereum() !== undefined || solanaWallets.length > 0
  $("signin-evm").hidden = ethereum() === undefined
}

const showDashboard = async (session) => {
  signedIn = session
  csrfToken = session.csrfToken
  $("signin").hidden = true
  $("dashboard").hidden = false
  $("who").textContent = session.wallet === null ? session.accountId : session.wallet.address
  // A top-up credits the paying wallet: only a wallet (on Base) tops itself up here.
  $("topup-section").hidden = session.wallet === null || session.wallet.family !== "evm"
  $("new-key").hidden = true
  await refresh()
}

const refresh = () => Promise.all([loadAccount(), loadKeys(), loadUsage()])

const emptyRow = (columns, text) => element("tr", {}, element("td", { colspan: String(columns), class: "empty" }, text))

const KINDS = { topup: "Top-up", grant: "Credit grant", refund: "Refund" }

const loadAccount = async () => {
  const account = await api("GET", "api/v1/portal/account")
  $("balance-usd").textContent = usd(account.availableUsd)
  $("allowance-usd").textContent = usd(account.allowanceUsd)
  $("staked-tokens").textContent = String(account.stakedTokens)
  const body = $("transactions").tBodies[0]
  body.replaceChildren(...(account.transactions.length === 0
    ? [emptyRow(4, "No top-ups or grants in the last 30 days.")]
    : account.transactions.map((entry) =>
      element(
        "tr",
        {},
        element("td", {}, when(entry.timestamp)),
        element("td", {}, KINDS[entry.kind] ?? entry.kind),
        element("td", { class: "num" }, entry.currency === "USD" ? usd(entry.amountUsd) : entry.amountUsd),
        element("td", { class: "mono reference hide-narrow", title: entry.reference }, entry.reference)
      ))))
}

const PERIODS = { EPOCH: "per UTC day", MONTH: "per UTC month", LIFETIME: "over its lifetime" }

/** The active keys by id, as last listed: what the cap form offers. */
let activeKeys = new Map()

const capText = (key) => key.consumptionLimits.usd === null ? "none" : `${usdOfNumber(key.consumptionLimits.usd)} ${PERIODS[key.limitPeriod] ?? key.limitPeriod}`

/** Puts the chosen key's cap (or none) into the cap form's fields. */
const showCapOf = (id) => {
  const key = activeKeys.get(id)
  $("cap-usd").value = key === undefined || key.consumptionLimits.usd === null ? "" : String(key.consumptionLimits.usd)
  $("cap-period").value = key?.limitPeriod ?? "EPOCH"
}

/** A key picker lists the active keys, keeping the chosen one while it stays active. */
const fillKeyPicker = (select) => {
  const chosen = select.value
  select.replaceChildren(...[...activeKeys.values()].map((key) =>
    element("option", { value: key.id }, `${key.description} (${when(key.createdAt)})`)
  ))
  if (activeKeys.has(chosen)) select.value = chosen
}

/** The cap and restriction forms list the active keys and show the chosen key's values. */
const fillKeyForms = (keys) => {
  activeKeys = new Map(keys.filter((key) => key.revokedAt === null).map((key) => [key.id, key]))
  fillKeyPicker($("cap-key"))
  showCapOf($("cap-key").value)
  $("cap-form").hidden = activeKeys.size === 0
  fillKeyPicker($("restrict-key"))
  showRestrictionsOf($("restrict-key").value)
  $("restrict-form").hidden = activeKeys.size === 0
}

/** The restrictions a key may carry (`KeyRestrictions.Restrictions`), as the form and the table name them. */
const RESTRICTIONS = { models: "models", networks: "networks", methods: "RPC methods", operations: "operations", ips: "client addresses" }

const restrictionsText = (restrictions) => {
  const named = Object.entries(RESTRICTIONS).filter(([name]) => restrictions?.[name] !== undefined)
  return named.length === 0 ? "none" : named.map(([name, label]) => `${label}: ${restrictions[name].join(", ")}`).join("; ")
}

/** Puts the chosen key's restrictions into the form's fields, one comma-separated list each. */
const showRestrictionsOf = (id) => {
  const restrictions = activeKeys.get(id)?.restrictions
  for (const name of Object.keys(RESTRICTIONS)) $(`restrict-${name}`).value = (restrictions?.[name] ?? []).join(", ")
}

/** The form's restrictions as `PATCH` takes them: a field's comma-separated entries, an empty field left out. */
const restrictionsOfForm = () => {
  const restrictions = {}
  for (const name of Object.keys(RESTRICTIONS)) {
    const entries = $(`restrict-${name}`).value.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")
    if (entries.length > 0) restrictions[name] = entries
  }
  return restrictions
}

const loadKeys = async () => {
  const { data } = await api("GET", "api/v1/portal/keys")
  fillKeyForms(data)
  const body = $("keys").tBodies[0]
  body.replaceChildren(...(data.length === 0
    ? [emptyRow(8, "No keys yet.")]
    : data.map((key) => {
      const revoke = element("button", { type: "button", class: "danger", "aria-label": `Revoke the key ${key.description}` }, "Revoke")
      revoke.addEventListener("click", () => {
        if (!window.confirm(`Revoke the key “${key.description}”? Calls with it stop at once.`)) return
        return busy(revoke, async () => {
          await api("DELETE", `api/v1/portal/keys?id=${encodeURIComponent(key.id)}`)
          say(`Revoked the key “${key.description}”.`, "ok")
          await loadKeys()
        })
      })
      return element(
        "tr",
        key.revokedAt === null ? {} : { class: "revoked" },
        element("td", {}, key.description),
        element("td", { class: "hide-narrow" }, key.apiKeyType),
        element("td", { class: "hide-narrow" }, when(key.createdAt)),
        element("td", {}, key.revokedAt === null ? "active" : `revoked ${when(key.revokedAt)}`),
        element("td", {}, capText(key)),
        element("td", { class: "num" }, key.currentPeriodUsage === undefined ? "not counted" : usd(key.currentPeriodUsage.usd)),
        element("td", {}, restrictionsText(key.restrictions)),
        element("td", {}, ...(key.revokedAt === null ? [revoke] : []))
      )
    })))
}

const PALETTE = ["#1f4fd1", "#b3480b", "#1b6e3a", "#7a2ea8", "#a3261b", "#0b6e79", "#6b5a00", "#4a4a55"]

/** Stacked bars: one per day, one segment per sku, in inline SVG. */
const drawChart = (usage) => {
  // As wide as the chart is shown, so that its labels keep their size on a phone.
  const width = Math.max(300, $("usage-chart").clientWidth || 640)
  const height = 200
  const left = 84
  const bottom = 24
  const top = 8
  const colour = new Map(usage.skus.map(({ sku }, index) => [sku, PALETTE[index % PALETTE.length]]))
  const max = Math.max(...usage.days.map((day) => Number(day.amountUsd)), 0)
  const scale = max === 0 ? 0 : (height - top - bottom) / max
  const step = (width - left) / usage.days.length
  const svg = svgElement("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": "usage-chart-title" })
  const title = svgElement("title", { id: "usage-chart-title" })
  title.textContent = `Spend by day over the last ${usage.days.length} days, ${usdRounded(usage.days.reduce((sum, day) => sum + Number(day.amountUsd), 0))} in all`
  svg.append(title)
  for (const fraction of [0, 0.5, 1]) {
    const y = height - bottom - fraction * (height - top - bottom)
    svg.append(svgElement("line", { x1: left, x2: width, y1: y, y2: y, class: "grid" }))
    const label = svgElement("text", { x: left - 6, y: y + 4, "text-anchor": "end", class: "axis" })
    label.textContent = usdRounded(max * fraction)
    svg.append(label)
  }
  usage.days.forEach((day, index) => {
    const x = left + index * step + step * 0.15
    let y = height - bottom
    for (const { sku, amountUsd } of day.skus) {
      const h = Number(amountUsd) * scale
      y -= h
      const bar = svgElement("rect", {
        x,
        y,
        width: step * 0.7,
        height: Math.max(h, Number(amountUsd) > 0 ? 1 : 0),
        fill: colour.get(sku),
        "data-date": day.date,
        "data-sku": sku
      })
      const tip = svgElement("title")
      tip.textContent = `${day.date} ${sku}: ${usd(amountUsd)}`
      bar.append(tip)
      svg.append(bar)
    }
    if ((usage.days.length - 1 - index) % 7 === 0) {
      const last = index === usage.days.length - 1
      const label = svgElement("text", { x: last ? width : x + step * 0.35, y: height - 6, "text-anchor": last ? "end" : "middle", class: "axis" })
      label.textContent = day.date.slice(5)
      svg.append(label)
    }
  })
  $("usage-chart").replaceChildren(svg)
  $("usage-legend").replaceChildren(...usage.skus.map(({ sku, amountUsd }) => {
    const swatch = svgElement("svg", { viewBox: "0 0 10 10", "aria-hidden": "true" })
    swatch.append(svgElement("rect", { width: 10, height: 10, fill: colour.get(sku) }))
    return element("li", {}, swatch, `${sku}: ${usd(amountUsd)}`)
  }))
  $("usage-total").textContent = usage.skus.length === 0 ? "No paid calls in this period." : ""
}

let shownUsage
let redraw = 0
window.addEventListener("resize", () => {
  cancelAnimationFrame(redraw)
  redraw = requestAnimationFrame(() => shownUsage !== undefined && drawChart(shownUsage))
})

const loadUsage = async () => {
  const usage = await api("GET", "api/v1/portal/usage")
  shownUsage = usage
  drawChart(usage)
  const body = $("usage-table").tBodies[0]
  body.replaceChildren(...(usage.recent.length === 0
    ? [emptyRow(5, "No paid calls yet.")]
    : usage.recent.map((entry) =>
      element(
        "tr",
        {},
        element("td", {}, when(entry.timestamp)),
        element("td", {}, entry.sku),
        element("td", { class: "num hide-narrow" }, String(entry.unit)),
        element("td", { class: "num" }, entry.currency === "USD" ? usdOfNumber(entry.amount) : `${entry.amount} ${entry.currency}`),
        element("td", { class: "mono" }, entry.inferenceDetails.requestId)
      ))))
}

// ---- top-up through x402 --------------------------------------------------------------------

const TRANSFER_WITH_AUTHORIZATION = [
  { name: "from", type: "address" },
  { name: "to", type: "address" },
  { name: "value", type: "uint256" },
  { name: "validAfter", type: "uint256" },
  { name: "validBefore", type: "uint256" },
  { name: "nonce", type: "bytes32" }
]

const EIP712_DOMAIN = [
  { name: "name", type: "string" },
  { name: "version", type: "string" },
  { name: "chainId", type: "uint256" },
  { name: "verifyingContract", type: "address" }
]

/**
 * The x402 flow of the top-up endpoint: ask (402 with `accepts`), sign the EIP-3009 transfer of
 * the EVM entry with the wallet, send it back in `PAYMENT-SIGNATURE`.
 */
const topUp = async (amount) => {
  const provider = ethereum()
  if (provider === undefined) throw new Error("No Ethereum wallet in this browser")
  const from = signedIn.wallet.address
  const [current] = await provider.request({ method: "eth_requestAccounts" })
  if (current?.toLowerCase() !== from.toLowerCase()) throw new Error(`Switch your wallet to ${from}, the account signed in here`)
  const url = `api/v1/x402/top-up?amountUsd=${encodeURIComponent(amount)}`
  const asked = await fetch(url, { method: "POST" })
  const required = await asked.json().catch(() => ({}))
  if (asked.status !== 402) throw new Error(typeof required.error === "string" ? required.error : `HTTP ${asked.status}`)
  const accept = (required.accepts ?? []).find((entry) => entry.scheme === "exact" && entry.network.startsWith("eip155:"))
  if (accept === undefined) throw new Error("This server takes no USDC payments on an EVM chain")
  const chainId = Number(accept.network.slice("eip155:".length))
  await ensureChain(provider, chainId)
  const authorization = {
    from,
    to: accept.payTo,
    value: accept.amount,
    validAfter: "0",
    validBefore: String(Math.floor(Date.now() / 1000) + accept.maxTimeoutSeconds),
    nonce: randomHex32()
  }
  const typedData = {
    types: { EIP712Domain: EIP712_DOMAIN, TransferWithAuthorization: TRANSFER_WITH_AUTHORIZATION },
    primaryType: "TransferWithAuthorization",
    domain: { name: accept.extra.name, version: accept.extra.version, chainId, verifyingContract: accept.asset },
    message: authorization
  }
  say("Approve the USDC transfer in your wallet…")
  const signature = await provider.request({ method: "eth_signTypedData_v4", params: [from, JSON.stringify(typedData)] })
  const payment = { x402Version: 2, resource: required.resource, accepted: accept, payload: { authorization, signature } }
  say("Settling the payment…")
  const paid = await fetch(url, {
    method: "POST",
    headers: { "PAYMENT-SIGNATURE": base64(new TextEncoder().encode(JSON.stringify(payment))) }
  })
  const result = await paid.json().catch(() => ({}))
  if (!paid.ok) throw new Error(typeof result.error === "string" ? `The payment was refused: ${result.error}` : `HTTP ${paid.status}`)
  return result
}

// ---- wiring ---------------------------------------------------------------------------------

const signInWith = (button, run) =>
  busy(button, async () => {
    const session = await run()
    say("Signed in.", "ok")
    await showDashboard(session)
  })

$("signin-evm").addEventListener("click", (event) => signInWith(event.currentTarget, signInWithEvm))
$("signin-solana").addEventListener("click", (event) => signInWith(event.currentTarget, signInWithSolana))

$("signin-key").addEventListener("submit", (event) => {
  event.preventDefault()
  const input = $("admin-key")
  signInWith(event.submitter ?? event.currentTarget.querySelector("button"), async () => {
    const session = await api("POST", "api/v1/portal/session", { apiKey: input.value.trim() })
    input.value = ""
    return session
  })
})

$("signout").addEventListener("click", (event) =>
  busy(event.currentTarget, async () => {
    await api("DELETE", "api/v1/portal/session")
    showSignIn()
    say("Signed out.", "ok")
  }))

$("topup").addEventListener("submit", (event) => {
  event.preventDefault()
  const amount = $("topup-amount").value.trim()
  busy(event.submitter ?? event.currentTarget.querySelector("button"), async () => {
    const result = await topUp(amount)
    say(`Credited ${usd(result.creditedUsd)}. Balance: ${usd(result.balanceUsd)}.`, "ok")
    await loadAccount()
  })
})

$("create-key").addEventListener("submit", (event) => {
  event.preventDefault()
  const input = $("key-description")
  busy(event.submitter ?? event.currentTarget.querySelector("button"), async () => {
    const created = await api("POST", "api/v1/portal/keys", { description: input.value.trim() })
    input.value = ""
    $("new-key-value").textContent = created.apiKey
    $("new-key").hidden = false
    $("copy-key").textContent = "Copy"
    say("Key created. Copy it now: it is not shown again.", "ok")
    $("new-key-value").focus()
    await loadKeys()
  })
})

$("cap-key").addEventListener("change", (event) => showCapOf(event.currentTarget.value))

/** Sends a cap change of the chosen key (`usd` null removes the cap) and shows the key's new cap. */
const changeCap = (button, consumptionLimit, limitPeriod) => {
  const key = activeKeys.get($("cap-key").value)
  if (key === undefined) return
  return busy(button, async () => {
    const changed = await api("PATCH", "api/v1/portal/keys", { id: key.id, consumptionLimit, ...(limitPeriod === undefined ? {} : { limitPeriod }) })
    // The table first, so that what the status announces is already shown.
    await loadKeys()
    say(changed.consumptionLimits.usd === null ? `Removed the spend cap of “${key.description}”.` : `The key “${key.description}” may spend ${capText(changed)}.`, "ok")
  })
}

$("cap-form").addEventListener("submit", (event) => {
  event.preventDefault()
  changeCap(event.submitter ?? event.currentTarget.querySelector("button"), { usd: Number($("cap-usd").value) }, $("cap-period").value)
})

$("cap-remove").addEventListener("click", (event) => changeCap(event.currentTarget, { usd: null }))

$("restrict-key").addEventListener("change", (event) => showRestrictionsOf(event.currentTarget.value))

/** Sends the chosen key's restrictions (`null` lifts them) and shows the key's new ones. */
const changeRestrictions = (button, restrictions) => {
  const key = activeKeys.get($("restrict-key").value)
  if (key === undefined) return
  return busy(button, async () => {
    const changed = await api("PATCH", "api/v1/portal/keys", { id: key.id, restrictions })
    await loadKeys()
    say(changed.restrictions === null ? `Lifted the restrictions of “${key.description}”.` : `The key “${key.description}” is restricted to ${restrictionsText(changed.restrictions)}.`, "ok")
  })
}

$("restrict-form").addEventListener("submit", (event) => {
  event.preventDefault()
  const restrictions = restrictionsOfForm()
  changeRestrictions(event.submitter ?? event.currentTarget.querySelector("button"), Object.keys(restrictions).length === 0 ? null : restrictions)
})

$("restrict-lift").addEventListener("click", (event) => changeRestrictions(event.currentTarget, null))

$("copy-key").addEventListener("click", (event) => {
  const button = event.currentTarget
  navigator.clipboard.writeText($("new-key-value").textContent).then(
    () => {
      button.textContent = "Copied"
    },
    () => say("The browser refused the clipboard: select the key and copy it.", "error")
  )
})

api("GET", "api/v1/portal/session").then((session) => session === undefined ? showSignIn() : showDashboard(session)).catch((error) => {
  showSignIn()
  say(describeError(error), "error")
})
