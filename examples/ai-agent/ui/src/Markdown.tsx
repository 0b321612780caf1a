import DOMPurify from "dompurify";
import { Marked, type Tokens } from "marked";
import { useMemo, type MouseEvent } from "react";

// Assistant text as markdown: parsed by marked, then sanitized by DOMPurify. Raw HTML in
// the text is shown as text, images are left out (no request to another site), links
// open in a new tab without a referrer, and each code block gets a Copy button.

const escape = (text: string) =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

const marked = new Marked({ gfm: true, breaks: true });
marked.use({
  renderer: {
    code({ text, lang }: Tokens.Code) {
      const language = (lang ?? "").split(/\s/)[0];
      return (
        `<div class="code-block"><div class="code-head"><span>${escape(language || "code")}</span>` +
        `<button type="button" class="copy" data-copy="1">Copy</button></div>` +
        `<pre><code>${escape(text)}</code></pre></div>`
      );
    },
    html({ text }: Tokens.HTML | Tokens.Tag) {
      return escape(text);
    },
    image({ text, href }: Tokens.Image) {
      return escape(text || href);
    },
  },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
});

export function renderMarkdown(text: string): string {
  const html = marked.parse(text, { async: false });
  return DOMPurify.sanitize(html, {
    FORBID_TAGS: ["img", "style", "form", "input", "iframe", "svg", "math", "video", "audio"],
    FORBID_ATTR: ["style"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  });
}

export async function copyText(text: string): Promise<void> {
  if (navigator.clipboard && window.isSecureContext) {
    await navigator.clipboard.writeText(text);
    return;
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.appendChild(area);
  area.select();
  document.execCommand("copy");
  area.remove();
}

function onCopy(event: MouseEvent<HTMLDivElement>) {
  const button = (event.target as HTMLElement).closest<HTMLButtonElement>("button[data-copy]");
  if (!button) return;
  const code = button.closest(".code-block")?.querySelector("code")?.textContent ?? "";
  void copyText(code).then(
    () => {
      button.textContent = "Copied";
      window.setTimeout(() => (button.textContent = "Copy"), 1500);
    },
    () => (button.textContent = "Copy failed"),
  );
}

export function Markdown({ text, className }: { text: string; className?: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return (
    <div className={`markdown ${className ?? ""}`} onClick={onCopy} dangerouslySetInnerHTML={{ __html: html }} />
  );
}
