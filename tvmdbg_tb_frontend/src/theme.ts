/** Follows TensorBoard's dark mode: TensorBoard toggles `dark-mode` on its own body, outside our
 * iframe (same origin). Standalone, the browser's colour scheme decides. */
export function followDarkMode(body: HTMLElement): void {
  let host: HTMLElement | null = null;
  try {
    if (window.parent !== window) host = window.parent.document.body;
  } catch {
    host = null; // not same-origin: fall back to the media query
  }
  const media = window.matchMedia?.("(prefers-color-scheme: dark)");
  const apply = () => body.classList.toggle("dark", host ? host.classList.contains("dark-mode") : !!media?.matches);
  apply();
  if (host) new MutationObserver(apply).observe(host, { attributes: true, attributeFilter: ["class"] });
  else media?.addEventListener?.("change", apply);
}
