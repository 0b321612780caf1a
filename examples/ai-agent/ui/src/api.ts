// The JSON the app's routes return (the session snapshot is dex_agents.ui_stream's
// browser-safe snapshot) and one helper for every call.

export const API = "/products/ai-agent";

export interface Provider {
  id: string;
  label: string;
  prefix: string | null;
  defaultModel: string;
  environmentVariable: string | null;
  isConfigured: boolean;
}

export interface CatalogTool {
  name: string;
  description: string;
  requiresApproval: boolean;
  server: string | null;
}

export interface Limits {
  messageBytes: number;
  storedMessageBytes: number;
  bodyBytes: number;
}

export interface SessionSummary {
  workflowId: string;
  startedAt: string;
  status: string;
  title: string | null;
}

export interface Portal {
  providers: Provider[];
  mcpServers: string[];
  tools: CatalogTool[];
  builtInTools: string[];
  toolsPending: boolean;
  limits: Limits;
  defaults: { systemPrompt: string; maxContextTokens: number; messageRetentionLimit: number };
}

export interface StoredMessage {
  sequence: number;
  turn_id: string;
  role: "user" | "assistant" | "tool" | "system";
  text: string | null;
  tool_call_id: string | null;
  tool_name: string | null;
  tool_arguments: string | null;
  tool_output: string | null;
}

export interface Interrupt {
  interrupt_id: string;
  tool_call_id: string;
  kind: "approval" | "question";
  tool_name: string;
  arguments: string;
  question: string | null;
  choices: string[] | null;
  allows_free_text: boolean | null;
}

export interface ToolCall {
  tool_call_id: string;
  tool_name: string;
  arguments: string;
  status: string;
  wait_until: string | null;
}

export interface QueuedMessage {
  message_id: string;
  text: string;
  plan_mode: boolean;
}

export interface Plan {
  revision: number;
  status: "draft" | "active" | "completed" | "cleared";
  tasks: { content: string; status: "pending" | "in_progress" | "completed" }[];
}

export interface Snapshot {
  state: { status: string; active_turn_id: string | null; last_turn_error: string | null } | null;
  messages: StoredMessage[];
  pending_interrupts: Interrupt[];
  tool_calls: ToolCall[];
  plan: Plan | null;
  queued_messages: QueuedMessage[];
  steered_messages: QueuedMessage[];
  context_summary: { last_sequence: number } | null;
  session_settings: { model?: string };
  resume_token: string;
  agent_status: string;
  flow: { status: string; error: string | null };
  limits: Limits;
  approvals: Record<string, "pending" | "approved" | "rejected" | "expired">;
}

export interface AgentEvent {
  type: string;
  turn_id: string;
  attempt: number;
  step_execution_id: string;
  payload: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

// The CSRF token the server put in the page; every mutation sends it (another origin
// cannot send this header without a CORS preflight, which the app never approves).
let csrfToken = document.querySelector<HTMLMetaElement>('meta[name="dex-csrf-token"]')?.content ?? "";

async function renewCsrfToken(): Promise<void> {
  // After a restart of the app the token of an open page is stale: read the page's again.
  const page = await fetch(`${API}/`, { cache: "no-store" }).then((response) => response.text());
  const match = /name="dex-csrf-token" content="([^"]+)"/.exec(page);
  if (match) csrfToken = match[1];
}

export async function call<T>(path: string, body?: unknown, retried = false): Promise<T> {
  const response = await fetch(`${API}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: body === undefined ? {} : { "content-type": "application/json", "x-csrf-token": csrfToken },
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  const data = await response.json().catch(() => ({}));
  if (response.status === 403 && data.code === "csrf" && !retried) {
    await renewCsrfToken();
    return call<T>(path, body, true);
  }
  if (response.status === 401 && data.code === "sign_in") {
    location.assign(`${API}/sign-in`);
  }
  if (!response.ok) {
    throw new ApiError(response.status, data.error ?? `request failed (${response.status})`);
  }
  return data as T;
}

/** Bytes of `text` as UTF-8, as the server counts a message. */
export function utf8Bytes(text: string): number {
  return new TextEncoder().encode(text).length;
}

/** Bytes of `text` as the stored JSON string (each character other than ASCII escaped). */
export function storedBytes(text: string): number {
  return JSON.stringify(text).length - 2;
}

export function formatBytes(count: number): string {
  if (count >= 1024 * 1024) return `${(count / (1024 * 1024)).toFixed(1)} MiB`;
  if (count >= 1024) return `${Math.round(count / 1024)} KiB`;
  return `${count} bytes`;
}

/** Why `text` does not fit, or "" (the same rule as the server's). */
export function sizeProblem(text: string, limits: Limits | undefined): string {
  if (!limits) return "";
  const size = utf8Bytes(text);
  if (size > limits.messageBytes) {
    return `This message is ${formatBytes(size)}; the limit is ${formatBytes(limits.messageBytes)}.`;
  }
  const stored = storedBytes(text);
  if (stored > limits.storedMessageBytes) {
    return `This message takes ${formatBytes(stored)} when stored (characters other than ASCII are stored escaped); the limit is ${formatBytes(limits.storedMessageBytes)}.`;
  }
  return "";
}
