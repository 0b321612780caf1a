// The chat scenario in a browser page (bundled with esbuild by the test): renders every
// message into #chat and approves the tool when the user clicks its Approve button.
import { runChatScenario } from "./ai_chat_scenario.mjs";

const sessionId = new URLSearchParams(location.search).get("session");
const root = document.getElementById("chat");
let pendingApproval;

function render(chat) {
  root.replaceChildren(...chat.messages.map((message) => {
    const item = document.createElement("li");
    item.dataset.role = message.role;
    item.dataset.id = message.id;
    for (const part of message.parts) {
      if (part.type === "text") {
        const text = document.createElement("p");
        text.className = "text";
        text.textContent = `${message.role}: ${part.text}`;
        item.append(text);
      } else if (part.type === "dynamic-tool") {
        const tool = document.createElement("div");
        tool.className = "tool";
        tool.dataset.state = part.state;
        tool.textContent = `tool ${part.toolName} [${part.state}]` +
          (part.state === "output-available" ? `: ${part.output}` : "");
        if (part.state === "approval-requested") {
          const button = document.createElement("button");
          button.className = "approve";
          button.textContent = `Approve ${part.toolName}`;
          button.onclick = () => pendingApproval?.(part.approval.id);
          tool.append(button);
        }
        item.append(tool);
      }
    }
    return item;
  }));
  document.getElementById("status").textContent = chat.status;
}

runChatScenario({
  baseUrl: location.origin,
  sessionId,
  onChange: render,
  approve: (chat, request) => new Promise((resolve, reject) => {
    render(chat);
    pendingApproval = (id) => {
      pendingApproval = undefined;
      chat.addToolApprovalResponse({ id, approved: true }).then(resolve, reject);
    };
  }),
}).then(
  (report) => { window.done = { report }; },
  (error) => { window.done = { error: String(error.stack ?? error) }; },
);
