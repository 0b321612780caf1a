// The AI SDK's own chat client (AbstractChat + DefaultChatTransport from `ai`) against the
// Python server: a plain turn, a tool approval round trip, and a reconnect mid-turn.
// Usage: node ai_chat_client.mjs <baseUrl> <sessionId>; prints one JSON report line.
import {
  AbstractChat,
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
} from "ai";

const [baseUrl, sessionId] = process.argv.slice(2);

class State {
  constructor() {
    this.messages = [];
    this.status = "ready";
    this.error = undefined;
  }
  pushMessage(message) { this.messages = this.messages.concat(message); }
  popMessage() { this.messages = this.messages.slice(0, -1); }
  replaceMessage(index, message) {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  }
  snapshot(value) { return structuredClone(value); }
}

class Chat extends AbstractChat {
  constructor(init) { super({ ...init, state: new State() }); }
}

let resumeToken;
const finishes = [];
const errors = [];
const chat = new Chat({
  id: sessionId,
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
  onFinish: ({ finishReason, isError }) => finishes.push(isError ? "transport-error" : finishReason),
  onError: (error) => errors.push(String(error)),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
});

async function until(condition, what) {
  const deadline = Date.now() + 60_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: status ${chat.status}, errors ${errors}, finishes ${finishes}: ${JSON.stringify(chat.messages)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const textOf = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
const last = () => chat.messages[chat.messages.length - 1];

// 1. A plain turn.
await chat.sendMessage({ text: "hello" });

// 2. A tool approval round trip: approve in the stream, the answer is sent automatically.
await chat.sendMessage({ text: "charge" });
const request = last().parts.find((p) => p.type === "dynamic-tool" && p.state === "approval-requested");
if (request === undefined) throw new Error(`no approval request: ${JSON.stringify(last())}`);
await chat.addToolApprovalResponse({ id: request.approval.id, approved: true });
await until(() => chat.status === "ready" && textOf(last()).includes("Done"), "the approved turn");

// 3. The server drops the connection mid-turn; reconnect with the latest token.
await chat.sendMessage({ text: "slow" });
const statusAfterDrop = chat.status;
const tokenAtDrop = resumeToken;
const partialText = textOf(last());
await chat.resumeStream();
await until(() => chat.status === "ready" && textOf(last()) === "part one. part two.", "the resumed turn");

console.log(JSON.stringify({
  messages: chat.messages,
  finishes,
  errors,
  statusAfterDrop,
  partialText,
  hadToken: typeof tokenAtDrop === "string",
}));
