import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { expect } from "vitest";
import type { TestApp } from "./app.ts";
import type { MemberFixture } from "./portal.ts";

/** The Chromium the page tests drive (.ci/run installs Debian's). */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
/** Whether it is here; the page tests say they were skipped when it is not. */
export const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser)
  process.stderr.write(
    `\nportal browser tests SKIPPED: no Chromium at ${CHROMIUM} (apt-get install chromium)\n\n`,
  );

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** Chromium, headless, as the page tests run it. */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu"] });
}

/** axe's violations on the page as it is now (the page's CSP allows no inline script: axe is added by CDP). */
export async function violations(page: Page): Promise<string[]> {
  await page.evaluate(axeSource);
  return page.evaluate(async () => {
    const result = await (
      globalThis as unknown as { axe: { run(): Promise<{ violations: { id: string; help: string }[] }> } }
    ).axe.run();
    return result.violations.map((v) => `${v.id}: ${v.help}`);
  });
}

/** Where the page tests leave a screenshot of each page they check, for a reviewer to look at (git-ignored). */
export const SCREENSHOTS = path.resolve(import.meta.dirname, "../../test-screenshots");

/**
 * What a person checks on every page: no accessibility violations, nothing wider than the screen. With a `name`,
 * the page is also saved as `test-screenshots/<name>-<width>.png`.
 */
export async function checkPage(page: Page, width: number, name?: string): Promise<void> {
  expect(await violations(page)).toEqual([]);
  const wider = await page.evaluate((w) => {
    if (document.documentElement.scrollWidth <= w) return [];
    return [...document.querySelectorAll<HTMLElement>("body *")]
      .filter((el) => el.getBoundingClientRect().right > w && !el.closest(".table-wrap"))
      .map((el) => `${el.tagName.toLowerCase()}.${el.className} ${el.getBoundingClientRect().right}`)
      .slice(0, 5);
  }, width);
  expect(wider, "elements wider than the screen").toEqual([]);
  if (name) {
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: path.join(SCREENSHOTS, `${name}-${width}.png`), fullPage: true });
  }
}

/** A page `width` px wide, signed in to the portal as `m` (its session cookie). */
export async function signedInPage(
  browser: Browser,
  t: TestApp,
  m: MemberFixture,
  width: number,
): Promise<Page> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  await context.addCookies([
    { name: "portal_session", value: (m.browser.cookie ?? "").split("=")[1] ?? "", url: t.partnerUrl },
  ]);
  return context.newPage();
}

/** Follows the portal's navigation to `name`, opening the "Menu" first on a narrow screen. */
export async function goTo(page: Page, name: string): Promise<void> {
  const menu = page.getByRole("button", { name: "Menu" });
  if (await menu.isVisible()) await menu.click();
  await page.getByRole("navigation", { name: "Portal" }).getByRole("link", { name, exact: true }).click();
}

/** Signs out from the member's menu in the bar. */
export async function signOut(page: Page, everywhere = false): Promise<void> {
  await page.locator(".member-menu summary").click();
  await page
    .getByRole("button", { name: everywhere ? "Sign out everywhere" : "Sign out", exact: true })
    .click();
}

/**
 * Tabs through the page from where focus is until it comes back round, as a person with a keyboard would.
 * Every visible control (links, buttons, fields, a radio group once, scrolling regions) is reached, each shows
 * where focus is (an outline or a ring), and focus is never trapped. Returns what was
 * reached, in order, for the failure message.
 */
export async function tabCycle(page: Page): Promise<string[]> {
  // A page's data arrives after its heading: count its controls once nothing is still loading.
  await page.waitForFunction(() =>
    [...document.querySelectorAll("p[aria-live]")].every((p) => p.textContent?.trim() !== "Loading…"),
  );
  const total = await page.evaluate(() => {
    const controls = document.querySelectorAll<HTMLElement>(
      'a[href], button:not([disabled]), input:not([disabled]):not([type="hidden"]), select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex="-1"])',
    );
    const groups = new Map<string, number>();
    let n = 0;
    for (const el of controls) {
      delete el.dataset.kb;
      if (!el.checkVisibility()) continue;
      if (el instanceof HTMLInputElement && el.type === "radio") {
        // Tab reaches the checked radio of a group; the arrow keys move within it.
        const group = `${el.form?.getAttribute("aria-label") ?? ""}/${el.name}`;
        if (!groups.has(group)) groups.set(group, n++);
        el.dataset.kb = String(groups.get(group));
        continue;
      }
      el.dataset.kb = String(n++);
    }
    return n;
  });
  const reached = new Map<string, string>();
  const order: string[] = [];
  for (let i = 0; i < total * 2 + 10; i++) {
    await page.keyboard.press("Tab");
    const f = await page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null;
      if (!el || el === document.body) return undefined;
      const style = getComputedStyle(el);
      return {
        kb: el.dataset.kb ?? "",
        what: `${el.tagName.toLowerCase()} ${el.getAttribute("name") ?? ""} ${(el.textContent ?? "").trim().slice(0, 40)}`,
        shown:
          // The last stop in a date or time field is its calendar button, which Chromium rings itself.
          (el instanceof HTMLInputElement &&
            /^(date|datetime-local|time|month|week)$/.test(el.type) &&
            !el.matches(":focus")) ||
          (style.outlineStyle !== "none" && Number.parseFloat(style.outlineWidth) > 0) ||
          style.boxShadow !== "none",
      };
    });
    if (!f) continue;
    expect(f.kb, `focus reached something that is not a control: ${f.what}`).not.toBe("");
    expect(f.shown, `no visible focus on ${f.what}`).toBe(true);
    if (reached.has(f.kb)) {
      if (reached.size === total) break;
      // Round once without reaching everything: something is out of reach, or focus is held.
      if (f.kb === order[0]) break;
      continue;
    }
    reached.set(f.kb, f.what);
    order.push(f.kb);
  }
  const seen = [...reached.values()];
  expect(reached.size, `reached by Tab: ${seen.join(" | ")}`).toBe(total);
  return seen;
}
