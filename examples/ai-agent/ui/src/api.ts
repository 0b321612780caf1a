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

export interface Portal {
  providers: Provider[];
  mcpServers: string[];
  tools: CatalogTool[];
  builtInTools: string[];
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

export async function call<T>(path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${API}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    throw new ApiError(response.status, data.error ?? `request failed (${response.status})`);
  }
  return data as T;
}
