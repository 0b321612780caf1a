// The AI SDK's own chat client (AbstractChat + DefaultChatTransport from `ai`) against the
// Python server: a plain turn, a tool approval round trip, and a reconnect mid-turn. Shared
// by the node client (ai_chat_client.mjs) and the browser page (ai_chat_page.mjs).
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";

class State {
  constructor(onChange) {
    this.onChange = onChange;
    this._messages = [];
    this._status = "ready";
    this.error = undefined;
  }
  get messages() { return this._messages; }
  set messages(value) { this._messages = value; this.onChange(); }
  get status() { return this._status; }
  set status(value) { this._status = value; this.onChange(); }
  pushMessage(message) { this.messages = this._messages.concat(message); }
  popMessage() { this.messages = this._messages.slice(0, -1); }
  replaceMessage(index, message) {
    const messages = this._messages;
    this.messages = [...messages.slice(0, index), message, ...messages.slice(index + 1)];
  }
  snapshot(value) { return structuredClone(value); }
}

class Chat extends AbstractChat {
  constructor({ onChange, ...init }) { super({ ...init, state: new State(onChange) }); }
}

export const textOf = (message) =>
  message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");

/**
 * Runs the three steps and returns a JSON-ready report.
 * `approve(chat, request)` answers the approval request (the UI's approval response);
 * `onChange(chat)` sees every state change (the browser renders it).
 */
export async function runChatScenario({ baseUrl, sessionId, approve, onChange = () => {} }) {
  let resumeToken;
  const finishes = [];
  const errors = [];
  let chat;
  chat = new Chat({
    id: sessionId,
    onChange: () => { if (chat !== undefined) onChange(chat); },
    transport: new DefaultChatTransport({
      api: `${baseUrl}/api/chat`,
      prepareReconnectToStreamRequest: ({ id }) => ({
        api: `${baseUrl}/api/chat/${id}/stream`,
        headers: resumeToken === undefined ? {} : { "x-agent-resume-token": resumeToken },
      }),
    }),
    onData: (part) => {
      if (part.type === "data-agent-resume-token") resumeToken = part.data;
    },
    onFinish: ({ finishReason, isError }) =>
      finishes.push(isError ? "transport-error" : finishReason),
    onError: (error) => errors.push(String(error)),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });

  async function until(condition, what) {
    const deadline = Date.now() + 60_000;
    while (!condition()) {
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for ${what}: status ${chat.status}, errors ${errors}, ` +
          `finishes ${finishes}: ${JSON.stringify(chat.messages)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
  const last = () => chat.messages[chat.messages.length - 1];

  // 1. A plain turn.
  await chat.sendMessage({ text: "hello" });

  // 2. A tool approval round trip: approve in the stream, the answer is sent automatically.
  await chat.sendMessage({ text: "charge" });
  const request = last().parts.find(
    (p) => p.type === "dynamic-tool" && p.state === "approval-requested");
  if (request === undefined) throw new Error(`no approval request: ${JSON.stringify(last())}`);
  await approve(chat, request);
  await until(() => chat.status === "ready" && textOf(last()).includes("Done"), "the approved turn");

  // 3. The server drops the connection mid-turn; reconnect with the latest token.
  await chat.sendMessage({ text: "slow" });
  const statusAfterDrop = chat.status;
  const tokenAtDrop = resumeToken;
  const partialText = textOf(last());
  await chat.resumeStream();
  await until(
    () => chat.status === "ready" && textOf(last()) === "part one. part two.", "the resumed turn");

  return {
    messages: chat.messages,
    finishes,
    errors,
    statusAfterDrop,
    partialText,
    hadToken: typeof tokenAtDrop === "string",
  };
}
