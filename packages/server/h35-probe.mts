import { chromium } from "playwright-core"
import { ShippedServer } from "@tollgate/testkit"
const server = await ShippedServer.start()
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"] })
const page = await browser.newPage({ viewport: { width: 1280, height: 800 } })
const requests: string[] = []
page.on("request", (r) => requests.push(r.url().slice(0, 120)))
page.on("console", (m) => console.log("console", m.type(), m.text().slice(0, 300)))
page.on("pageerror", (e) => console.log("pageerror", String(e).slice(0, 300)))
await page.goto(`${server.origin}/docs`, { waitUntil: "networkidle" })
await page.waitForTimeout(4000)
const info = await page.evaluate(() => {
  const h1 = document.querySelector("h1")
  const loading = [...document.querySelectorAll(".loading")].length
  return { h1: h1?.textContent, box: h1?.getBoundingClientRect().top, loading, sections: [...document.querySelectorAll("section")].slice(0, 4).map((s) => s.id + " " + s.getBoundingClientRect().top) }
})
console.log(JSON.stringify(info), requests)
await page.screenshot({ path: "/tmp/h35-docs2.png" })
await browser.close()
await server.stop()
